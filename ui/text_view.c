/* text_view.c - the text pane's view model (text_view.h). */
#include "base/array.h"
#include "text_view.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forest_view.h"
#include "uline.h"

void tv_init(text_view *v) {
    memset(v, 0, sizeof *v);
    v->leaf = FOREST_NONE;
    v->follow = true;
}

void tv_free(text_view *v) {
    free(v->idx);
    tv_init(v);
}

st_code tv_set(text_view *v, const forest *f, forest_id leaf, st_err *err) {
    const forest_node *nd = forest_get(f, leaf);
    if (!nd) {
        v->n = 0;
        v->leaf = FOREST_NONE;
        return st_set(err, ST_ERR_ARG, "stale node");
    }
    int32_t n = 1;
    for (const forest_node *p = nd; p->parent >= 0; p = forest_node_at(f, p->parent)) n++;
    if (!ARR_GROW_I32(v->idx, n, v->cap))
        return st_set(err, ST_ERR_NOMEM, "out of memory for the text view");
    int32_t old_n = v->n;
    bool same = leaf == v->leaf;
    int32_t at = forest_index(leaf);
    for (int32_t i = n - 1; i >= 0; i--) {
        v->idx[i] = at;
        at = forest_node_at(f, at)->parent;
    }
    v->n = n;
    (void)old_n;
    if (!same) { /* another branch: start at its end, following it as it grows */
        v->cursor = n;
        v->follow = true;
        v->alt = 0;
    } else if (v->follow || v->cursor > n)
        v->cursor = n;
    v->leaf = leaf;
    return ST_OK;
}

void tv_move(text_view *v, int32_t delta) {
    int32_t c = v->cursor + delta;
    if (c < 0) c = 0;
    if (c > v->n) c = v->n;
    v->cursor = c;
    v->alt = 0;
    v->follow = c == v->n;
}

int tv_class(const text_view *v, const forest *f, int32_t i) {
    if (i < 0 || i >= v->n) return 3;
    float lp = forest_node_at(f, v->idx[i])->logprob;
    if (isnan(lp)) return 3;
    double p = exp((double)lp);
    return p < 0.1 ? 0 : p < 0.5 ? 1 : 2;
}

int tv_token(const text_view *v, const forest *f, const tok *tk, int32_t i, char *out, size_t cap) {
    if (i < 0 || i >= v->n) {
        if (cap) out[0] = '\0';
        return 3;
    }
    fv_token_text(f, tk, v->idx[i], out, cap);
    return tv_class(v, f, i);
}

void tv_stream_start(const text_view *v, const forest *f, const tok *tk, tok_stream *s) {
    if (tk && v->n > 0) fv_stream_start(f, tk, v->idx[0], s);
    else tok_stream_init(s);
}

/* Appends src to the string in out when it fits whole. */
static void cat(char *out, size_t cap, const char *src) {
    size_t n = strlen(out), m = strlen(src);
    if (n + m < cap) memcpy(out + n, src, m + 1);
}

int32_t tv_cell(const text_view *v, const forest *f, const tok *tk, tok_stream *s, int32_t i,
                char *out, size_t cap) {
    out[0] = '\0';
    if (i < 0 || i >= v->n) return v->n;
    if (!tk) {
        snprintf(out, cap, "[%d]", forest_node_at(f, v->idx[i])->token);
        return i + 1;
    }
    char tb[256];
    int32_t j = i;
    for (;;) {
        fv_stream_put(tk, s, forest_node_at(f, v->idx[j])->token, tb, sizeof tb);
        cat(out, cap, tb);
        if (++j >= v->n) break;
        if (s->n_pend > 0) continue;
        /* the next cell's first character (it may take a few tokens) */
        tok_stream peek = *s;
        tb[0] = '\0';
        for (int32_t k = j; k < v->n && k < j + 4 && !tb[0]; k++)
            fv_stream_put(tk, &peek, forest_node_at(f, v->idx[k])->token, tb, sizeof tb);
        unsigned cp;
        if (!(ui_utf8_char((const unsigned char *)tb, &cp) > 1 && ui_char_cols(cp) == 0)) break;
    }
    if (j == v->n) fv_pending_text(s, out, cap);
    return j;
}

int32_t tv_alts(const text_view *v, const forest *f, int32_t *ids, float *lps, int32_t cap,
                forest_id *parent) {
    if (parent) *parent = FOREST_NONE;
    if (v->n == 0 || v->cursor == 0) return 0; /* a root has no parent to fork from */
    int32_t p = v->idx[v->cursor - 1];
    forest_id pid = forest_id_at(f, p);
    if (parent) *parent = pid;
    return forest_topk(f, pid, ids, lps, cap);
}
