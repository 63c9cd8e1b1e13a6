/* uline.h - building one display line of at most N columns from UTF-8 text, with
 * control characters made visible (a newline as U+21B5 or "\n" in ASCII mode). Views use
 * it so that what they return fits the width they were given. Columns are measured with
 * wcwidth (the caller has set a UTF-8 LC_CTYPE, as ui_screen_start does): CJK and emoji
 * take two, combining marks none (one at the start of a line is shown on U+25CC, since
 * it has no character to combine with), characters wcwidth cannot print are shown as
 * U+FFFD. Bytes that are not UTF-8 are shown escaped ("<E6>"), so what the line holds is
 * always valid UTF-8. Header-only, no state but the line. */
#ifndef MD_UI_ULINE_H
#define MD_UI_ULINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <wchar.h>

typedef struct ui_line {
    char *s;       /* the caller's buffer, always NUL-terminated */
    size_t cap;    /* its size in bytes, > 0 */
    size_t len;    /* bytes used */
    int cols;      /* columns used */
    int max_cols;  /* columns allowed */
    bool utf8;     /* false: ASCII glyphs for control characters */
    bool full;     /* a character did not fit */
} ui_line;

static inline ui_line ui_line_make(char *buf, size_t cap, int max_cols, bool utf8) {
    ui_line l = {buf, cap, 0, 0, max_cols, utf8, false};
    if (cap) buf[0] = '\0';
    return l;
}

/* Appends n bytes of one character that takes w columns (0..2). */
static inline void ui_line_char_w(ui_line *l, const char *c, size_t n, int w) {
    if (l->full || l->cols + w > l->max_cols || l->len + n + 1 > l->cap) {
        l->full = true;
        return;
    }
    memcpy(l->s + l->len, c, n);
    l->len += n;
    l->s[l->len] = '\0';
    l->cols += w;
}

/* Appends n bytes of one character that takes one column. */
static inline void ui_line_char(ui_line *l, const char *c, size_t n) { ui_line_char_w(l, c, n, 1); }

/* The length of the UTF-8 character at p (1..4) and its code point in *cp; 0 when the
 * bytes there are not a well-formed character (the same ranges as engine/tok/tok.c's
 * assembler: no overlong forms, surrogates or code points past U+10FFFF). */
static inline size_t ui_utf8_char(const unsigned char *p, unsigned *cp) {
    unsigned c = p[0];
    size_t n = c < 0x80 ? 1 : c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
    if (n <= 1) {
        *cp = c;
        return n;
    }
    unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    *cp = n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
    for (size_t i = 1; i < n; i++) *cp = *cp << 6 | (p[i] & 0x3Fu);
    return n;
}

/* The columns a code point takes on a UTF-8 terminal: wcwidth's, -1 when unprintable. */
static inline int ui_char_cols(unsigned cp) { return wcwidth((wchar_t)cp); }

/* Appends text; control characters become visible glyphs. Each source character goes in
 * whole or not at all (an escape "<E6>" too); returns the bytes of text that went in, so
 * that a caller breaking a long word knows where the next line starts. */
static inline size_t ui_line_put(ui_line *l, const char *text) {
    const unsigned char *p = (const unsigned char *)text;
    while (*p && !l->full) {
        char g[8];
        size_t gn = 0, n = 1;
        int w = 1;
        unsigned cp;
        if (*p < 0x20 || *p == 0x7f) {
            const char *s = *p == '\n' ? (l->utf8 ? "\xe2\x86\xb5" : "\\n")
                            : *p == '\t' ? " " : l->utf8 ? "\xc2\xb7" : ".";
            gn = strlen(s);
            memcpy(g, s, gn);
            w = *p == '\n' && !l->utf8 ? 2 : 1;
        } else if ((n = ui_utf8_char(p, &cp)) == 0) { /* not UTF-8: the byte, escaped */
            snprintf(g, sizeof g, "<%02X>", *p);
            gn = 4, w = 4, n = 1;
        } else if (n == 1) {
            g[0] = (char)*p, gn = 1;
        } else if (!l->utf8) {
            g[0] = '?', gn = 1; /* ASCII terminals: one '?' per character */
        } else if ((w = ui_char_cols(cp)) < 0) {
            memcpy(g, "\xef\xbf\xbd", 3), gn = 3, w = 1;
        } else {
            if (w == 0 && l->cols == 0) memcpy(g, "\xe2\x97\x8c", 3), gn = 3, w = 1; /* on U+25CC */
            memcpy(g + gn, p, n);
            gn += n;
            if (w > 2) w = 2;
        }
        ui_line_char_w(l, g, gn, w);
        if (l->full) break;
        p += n;
    }
    return (size_t)((const char *)p - text);
}

/* Appends what fits of text, breaking after the last space that fits when the next word
 * does not (a word wider than the line is cut where the line ends); returns the bytes of
 * text used, the spaces at the break included, so the next line starts there. */
static inline size_t ui_line_put_words(ui_line *l, const char *text) {
    size_t len0 = l->len;
    int cols0 = l->cols;
    size_t used = ui_line_put(l, text);
    if (!text[used]) return used;
    size_t sp = used;
    while (sp > 0 && text[sp] != ' ') sp--; /* text[used] itself may be the space */
    char tmp[1024];
    if (text[sp] == ' ' && sp > 0 && sp < sizeof tmp) { /* again, up to that space */
        memcpy(tmp, text, sp);
        tmp[sp] = '\0';
        l->len = len0, l->cols = cols0, l->full = false;
        l->s[len0] = '\0';
        ui_line_put(l, tmp);
        l->full = true;
        used = sp;
    }
    while (text[used] == ' ') used++;
    return used;
}

/* Pads with spaces to the full width. */
static inline void ui_line_pad(ui_line *l) {
    while (!l->full && l->cols < l->max_cols) ui_line_char(l, " ", 1);
}

#endif
