/* uline.h - building one display line of at most N columns from UTF-8 pieces, with
 * control characters made visible (a newline as U+21B5 or "\n" in ASCII mode). Views use
 * it so that what they return fits the width they were given. Counts one column per
 * character (wide CJK characters are not measured). Header-only, no state but the line. */
#ifndef MD_UI_ULINE_H
#define MD_UI_ULINE_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

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

/* Appends n bytes of one character that takes one column. */
static inline void ui_line_char(ui_line *l, const char *c, size_t n) {
    if (l->full || l->cols >= l->max_cols || l->len + n + 1 > l->cap) {
        l->full = true;
        return;
    }
    memcpy(l->s + l->len, c, n);
    l->len += n;
    l->s[l->len] = '\0';
    l->cols++;
}

/* Appends text; control characters become visible glyphs. */
static inline void ui_line_put(ui_line *l, const char *text) {
    const unsigned char *p = (const unsigned char *)text;
    while (*p && !l->full) {
        if (*p < 0x20 || *p == 0x7f) {
            if (*p == '\n') {
                if (l->utf8) ui_line_char(l, "\xe2\x86\xb5", 3);
                else ui_line_char(l, "\\", 1), ui_line_char(l, "n", 1);
            } else if (*p == '\t') ui_line_char(l, " ", 1);
            else ui_line_char(l, l->utf8 ? "\xc2\xb7" : ".", l->utf8 ? 2 : 1);
            p++;
            continue;
        }
        size_t n = *p < 0x80 ? 1 : (*p >> 5) == 6 ? 2 : (*p >> 4) == 14 ? 3 : (*p >> 3) == 30 ? 4 : 1;
        for (size_t i = 1; i < n; i++)
            if ((p[i] & 0xc0) != 0x80) n = 1; /* broken: take one byte */
        if (!l->utf8 && *p >= 0x80) { /* ASCII terminals: one '?' per character */
            ui_line_char(l, "?", 1);
        } else
            ui_line_char(l, (const char *)p, n);
        p += n;
    }
}

/* Pads with spaces to the full width. */
static inline void ui_line_pad(ui_line *l) {
    while (!l->full && l->cols < l->max_cols) ui_line_char(l, " ", 1);
}

#endif
