/* keys.c - key names, the key map and binding files (keys.h). Uses curses only for its
 * KEY_* constants (header macros), so it links and tests without a terminal. */
#include "keys.h"

#include <ncursesw/curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/infile.h"

static const struct { const char *name; int key; } ui_named_keys[] = {
    {"Space", ' '},         {"Tab", '\t'},          {"Enter", '\n'},       {"Esc", 27},
    {"Backspace", KEY_BACKSPACE}, {"Delete", KEY_DC}, {"Up", KEY_UP},      {"Down", KEY_DOWN},
    {"Left", KEY_LEFT},     {"Right", KEY_RIGHT},   {"PgUp", KEY_PPAGE},   {"PgDn", KEY_NPAGE},
    {"Home", KEY_HOME},     {"End", KEY_END},
};
#define N_NAMED (sizeof ui_named_keys / sizeof ui_named_keys[0])

/* Decodes one UTF-8 character that makes up all of s; -1 otherwise, also for ill-formed
 * UTF-8 (overlong forms, surrogates, past U+10FFFF), which no terminal sends as a key. */
static int utf8_one(const char *s) {
    static const int min_of_len[5] = {0, 0, 0x80, 0x800, 0x10000};
    const unsigned char *p = (const unsigned char *)s;
    int n = p[0] < 0x80 ? 1 : (p[0] >> 5) == 6 ? 2 : (p[0] >> 4) == 14 ? 3 : (p[0] >> 3) == 30 ? 4 : 0;
    if (!n || strlen(s) != (size_t)n) return -1;
    int c = n == 1 ? p[0] : p[0] & (0x7f >> n);
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) return -1;
        c = (c << 6) | (p[i] & 0x3f);
    }
    if (c < min_of_len[n] || (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff) return -1;
    return c;
}

int ui_key_parse(const char *name) {
    if (!name || !*name) return -1;
    for (size_t i = 0; i < N_NAMED; i++)
        if (!strcmp(name, ui_named_keys[i].name)) return ui_named_keys[i].key;
    if (name[0] == 'C' && name[1] == '-' && name[2] && !name[3]) {
        char c = name[2];
        if (c >= 'a' && c <= 'z') return c - 'a' + 1;
        if (c >= 'A' && c <= 'Z') return c - 'A' + 1;
        return -1;
    }
    if (name[0] == 'F' && name[1] >= '1' && name[1] <= '9') {
        char *end;
        long n = strtol(name + 1, &end, 10);
        if (!*end && n >= 1 && n <= 12) return KEY_F((int)n);
        return -1;
    }
    int c = utf8_one(name);
    return c > ' ' && c != 127 ? c : -1;
}

const char *ui_key_name(int key, char *buf, size_t cap) {
    for (size_t i = 0; i < N_NAMED; i++)
        if (ui_named_keys[i].key == key) return snprintf(buf, cap, "%s", ui_named_keys[i].name), buf;
    if (key >= 1 && key <= 26) snprintf(buf, cap, "C-%c", 'a' + key - 1);
    else if (key >= KEY_F(1) && key <= KEY_F(12)) snprintf(buf, cap, "F%d", key - KEY_F(0));
    else if (key > ' ' && key < 0x80) snprintf(buf, cap, "%c", key);
    else if (key >= 0x80 && key < 0x110000) {
        char u[5] = {0};
        if (key < 0x800) u[0] = (char)(0xc0 | key >> 6), u[1] = (char)(0x80 | (key & 0x3f));
        else if (key < 0x10000)
            u[0] = (char)(0xe0 | key >> 12), u[1] = (char)(0x80 | ((key >> 6) & 0x3f)),
            u[2] = (char)(0x80 | (key & 0x3f));
        else
            u[0] = (char)(0xf0 | key >> 18), u[1] = (char)(0x80 | ((key >> 12) & 0x3f)),
            u[2] = (char)(0x80 | ((key >> 6) & 0x3f)), u[3] = (char)(0x80 | (key & 0x3f));
        snprintf(buf, cap, "%s", u);
    } else
        snprintf(buf, cap, "?");
    return buf;
}

void ui_keymap_clear(ui_keymap *km) { memset(km, 0, sizeof *km); }

void ui_keymap_unbind(ui_keymap *km, int key, int view) {
    if (view < 0 || view >= UI_VIEW_N) return;
    for (int32_t i = 0; i < km->n[view]; i++)
        if (km->b[view][i].key == key) {
            km->b[view][i] = km->b[view][--km->n[view]];
            return;
        }
}

bool ui_keymap_bind(ui_keymap *km, int key, int action) {
    const ui_action_info *ai = ui_action_get(action);
    if (!ai) return false;
    /* a key already bound in the view keeps its place (the help lists keys in order) */
    for (int32_t i = 0; i < km->n[ai->view]; i++)
        if (km->b[ai->view][i].key == key) {
            km->b[ai->view][i].action = action;
            return true;
        }
    if (km->n[ai->view] == UI_KEYMAP_MAX) return false;
    km->b[ai->view][km->n[ai->view]++] = (ui_binding){key, action};
    return true;
}

void ui_keymap_defaults(ui_keymap *km) {
    ui_keymap_clear(km);
    for (int a = 0; a < UI_ACT_N; a++) {
        char names[64];
        snprintf(names, sizeof names, "%s", ui_action_get(a)->keys);
        for (char *save, *t = strtok_r(names, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
            int k = ui_key_parse(t);
            if (k >= 0) ui_keymap_bind(km, k, a);
        }
    }
}

int ui_keymap_lookup(const ui_keymap *km, int view, int key) {
    for (int pass = 0; pass < 2; pass++) {
        int v = pass ? UI_VIEW_ALL : view;
        if (v < 0 || v >= UI_VIEW_N || (pass == 0 && v == UI_VIEW_ALL)) continue;
        for (int32_t i = 0; i < km->n[v]; i++)
            if (km->b[v][i].key == key) return km->b[v][i].action;
    }
    return UI_ACT_NONE;
}

const char *ui_keymap_keys_of(const ui_keymap *km, int action, char *buf, size_t cap) {
    const ui_action_info *ai = ui_action_get(action);
    size_t len = 0;
    if (cap) buf[0] = '\0';
    if (!ai) return buf;
    /* in the order the keys were bound, so the defaults read as in the table */
    for (int32_t i = 0; i < km->n[ai->view]; i++) {
        if (km->b[ai->view][i].action != action) continue;
        char nm[16];
        ui_key_name(km->b[ai->view][i].key, nm, sizeof nm);
        int w = snprintf(buf + len, cap - len, "%s%s", len ? " " : "", nm);
        if (w < 0 || (size_t)w >= cap - len) break;
        len += (size_t)w;
    }
    return buf;
}

int32_t ui_keymap_parse(ui_keymap *km, const char *text, size_t len, const char *name,
                        char *msg, size_t cap) {
    int32_t bad = 0, lineno = 0;
    if (cap) msg[0] = '\0';
    size_t at = 0;
    while (at < len) {
        size_t end = at;
        while (end < len && text[end] != '\n') end++;
        char line[512];
        size_t n = end - at < sizeof line - 1 ? end - at : sizeof line - 1;
        memcpy(line, text + at, n);
        line[n] = '\0';
        at = end + 1;
        lineno++;
        char *hash = strchr(line, '#');
        /* "bind # foo" would be odd; a '#' key is written "#" after whitespace only as
         * the KEY word, so only strip comments that start a word at the line's start */
        char *w[4] = {0}, *save;
        int nw = 0;
        if (hash == line || (hash && strspn(line, " \t") == (size_t)(hash - line))) continue;
        for (char *t = strtok_r(line, " \t\r", &save); t && nw < 4; t = strtok_r(NULL, " \t\r", &save)) {
            if (nw >= 2 && t[0] == '#') break; /* a trailing comment */
            w[nw++] = t;
        }
        if (nw == 0) continue;
        const char *why = NULL;
        char why_buf[160];
        int key = nw >= 2 ? ui_key_parse(w[1]) : -1;
        if (!strcmp(w[0], "bind")) {
            int a = nw >= 3 ? ui_action_by_name(w[2]) : UI_ACT_NONE;
            if (nw != 3) why = "expected: bind KEY ACTION";
            else if (key < 0) why = (snprintf(why_buf, sizeof why_buf, "unknown key '%s'", w[1]), why_buf);
            else if (a < 0) why = (snprintf(why_buf, sizeof why_buf, "unknown action '%s'", w[2]), why_buf);
            else if (!ui_keymap_bind(km, key, a)) why = "too many bindings";
        } else if (!strcmp(w[0], "unbind")) {
            int v = -1;
            for (int i = 0; nw == 3 && i < UI_VIEW_N; i++)
                if (!strcmp(w[2], ui_view_name(i))) v = i;
            if (nw != 3) why = "expected: unbind KEY VIEW";
            else if (key < 0) why = (snprintf(why_buf, sizeof why_buf, "unknown key '%s'", w[1]), why_buf);
            else if (v < 0) why = (snprintf(why_buf, sizeof why_buf, "unknown view '%s'", w[2]), why_buf);
            else ui_keymap_unbind(km, key, v);
        } else
            why = (snprintf(why_buf, sizeof why_buf, "unknown word '%s' (bind, unbind)", w[0]), why_buf);
        if (why && bad++ == 0) snprintf(msg, cap, "%s:%d: %s", name, lineno, why);
    }
    return bad;
}

int32_t ui_keymap_load(ui_keymap *km, const char *path, char *msg, size_t cap) {
    if (cap) msg[0] = '\0';
    if (access(path, F_OK) != 0) return 0;
    st_err err = {0};
    size_t n;
    char *buf = infile_read(path, "key bindings", UI_KEYS_MAX_FILE, &n, &err);
    int32_t r = buf ? ui_keymap_parse(km, buf, n, path, msg, cap)
                    : (snprintf(msg, cap, "%s", err.msg), 1);
    free(buf);
    return r;
}
