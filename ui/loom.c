/* loom.c - the loom's edits (loom.h): a text written under a node sharing the tokens
 * already there, a line's text, two branches' first difference. */
#include "loom.h"

#include <stdlib.h>
#include <string.h>

/* The child of parent (FOREST_NONE: the roots) whose token is t, or FOREST_NONE. */
static forest_id child_with(const forest *f, forest_id parent, int32_t t) {
    if (parent == FOREST_NONE) {
        int32_t n = forest_roots(f, NULL, 0);
        forest_id *roots = malloc(sizeof *roots * (size_t)(n > 0 ? n : 1)), hit = FOREST_NONE;
        if (roots) forest_roots(f, roots, n);
        for (int32_t i = 0; roots && i < n && hit == FOREST_NONE; i++)
            if (forest_get(f, roots[i])->token == t) hit = roots[i];
        free(roots);
        return hit;
    }
    for (int32_t c = forest_get(f, parent)->first_child; c >= 0; c = forest_node_at(f, c)->next_sibling)
        if (forest_node_at(f, c)->token == t) return forest_id_at(f, c);
    return FOREST_NONE;
}

/* text's tokens as they go under node: BOS first at a new root when the model wants it. */
static int32_t *write_tokens(const tok *tk, forest_id node, const char *text, int32_t *n, st_err *err) {
    int32_t *t = tok_encode_alloc(tk, text, strlen(text), false, true, n, err);
    if (!t) return NULL;
    bool bos = node == FOREST_NONE && tok_add_bos(tk) && tok_bos(tk) >= 0 && (*n == 0 || t[0] != tok_bos(tk));
    if (bos) {
        int32_t *b = realloc(t, sizeof *t * (size_t)(*n + 1));
        if (!b) {
            free(t);
            st_set(err, ST_ERR_NOMEM, "out of memory");
            return NULL;
        }
        memmove(b + 1, b, sizeof *b * (size_t)*n);
        b[0] = tok_bos(tk), t = b, (*n)++;
    }
    if (*n <= 0) {
        free(t);
        st_set(err, ST_ERR_ARG, "nothing to write: the text has no tokens");
        return NULL;
    }
    return t;
}

/* The common beginning of a and b's first n tokens. */
static int32_t common_prefix(const int32_t *a, int32_t na, const int32_t *b, int32_t nb) {
    int32_t k = 0;
    while (k < na && k < nb && a[k] == b[k]) k++;
    return k;
}

/* text encoded after node's path, as the tokenizer would spell the whole (a typed leading
 * space joins the next word, a word finished across the boundary is one token): the tokens
 * after the first *keep of the path, which may be fewer than the path when the text changes
 * how its end is spelled. NULL with err clear when the path's text does not encode back to
 * its own tokens (sampled spellings), so the text goes under node on its own. */
static int32_t *context_tokens(const forest *f, const tok *tk, forest_id node, const char *text, int32_t *keep,
                               int32_t *n, st_err *err) {
    int32_t np = forest_path(f, node, NULL, 0), nc = 0, ne = 0;
    int32_t *p = malloc(sizeof *p * (size_t)(np > 0 ? np : 1)), *c = NULL, *e = NULL, *out = NULL;
    bool got = p && forest_path(f, node, p, np) == np;
    int32_t b = got && np > 0 && p[0] == tok_bos(tk); /* BOS decodes to nothing: left out and put back */
    char *ctx = got ? tok_decode_str(tk, p + b, np - b) : NULL;
    size_t lc = ctx ? strlen(ctx) : 0, lt = strlen(text);
    char *all = ctx ? malloc(lc + lt + 1) : NULL;
    if (!all) st_set(err, ST_ERR_NOMEM, "out of memory");
    else memcpy(all, ctx, lc), memcpy(all + lc, text, lt + 1), c = tok_encode_alloc(tk, ctx, lc, false, true, &nc, err);
    bool round_trip = c && nc == np - b && common_prefix(c, nc, p + b, np - b) == np - b;
    if (round_trip) e = tok_encode_alloc(tk, all, lc + lt, false, true, &ne, err);
    if (e) {
        int32_t k = common_prefix(e, ne, p + b, np - b);
        *keep = k + b, *n = ne - k;
        out = *n > 0 ? malloc(sizeof *out * (size_t)*n) : NULL;
        if (out) memcpy(out, e + k, sizeof *out * (size_t)*n);
        else if (*n > 0) st_set(err, ST_ERR_NOMEM, "out of memory");
        else st_set(err, ST_ERR_ARG, "nothing to write: the text has no tokens");
    }
    free(p), free(c), free(e), free(ctx), free(all);
    return out;
}

/* The node whose root-to-node path is the first keep of node's path; FOREST_NONE for none. */
static forest_id ancestor_at(const forest *f, forest_id node, int32_t keep) {
    int32_t idx = forest_index(node);
    for (int32_t up = forest_path(f, node, NULL, 0) - keep; up > 0 && idx >= 0; up--)
        idx = forest_node_at(f, idx)->parent;
    return idx >= 0 && keep > 0 ? forest_id_at(f, idx) : FOREST_NONE;
}

st_code ui_loom_write(forest *f, const tok *tk, forest_id node, const char *text, forest_id *leaf, bool *made,
                      st_err *err) {
    *made = false;
    if (node != FOREST_NONE && !forest_get(f, node)) return st_set(err, ST_ERR_ARG, "the selected node is gone");
    int32_t n, keep, *t = node != FOREST_NONE ? context_tokens(f, tk, node, text, &keep, &n, err) : NULL, i = 0;
    if (t) node = ancestor_at(f, node, keep);
    else if (err->code) return err->code;
    else t = write_tokens(tk, node, text, &n, err);
    if (!t) return err->code;
    forest_id at = node;
    for (forest_id c; i < n && (c = child_with(f, at, t[i])) != FOREST_NONE; i++) at = c;
    st_code rc = ST_OK;
    if (i < n)
        rc = at == FOREST_NONE ? forest_add_root(f, t, NULL, n, 0, &at, err)
                               : forest_append(f, at, t + i, NULL, n - i, &at, err);
    free(t);
    if (rc) return rc;
    *made = i < n;
    *leaf = at;
    return ST_OK;
}

/* The text the line's tokens add to what comes before them (a SentencePiece word keeps
 * its leading space mid-text), or the tokens decoded alone when that is not a clean cut. */
char *ui_loom_line_text(const forest *f, const tok *tk, int32_t start, int32_t end) {
    int32_t n = forest_node_at(f, end)->depth - forest_node_at(f, start)->depth + 1;
    forest_id leaf = forest_id_at(f, end);
    int32_t np = forest_path(f, leaf, NULL, 0);
    if (n <= 0 || np < n) return NULL;
    int32_t *t = malloc(sizeof *t * (size_t)np), at = end;
    if (!t) return NULL;
    forest_path(f, leaf, t, np);
    for (int32_t k = n - 1; k >= 0; k--) at = forest_node_at(f, at)->parent;
    char *s = NULL, *whole = at == forest_node_at(f, start)->parent ? tok_decode_str(tk, t, np) : NULL;
    char *before = whole ? tok_decode_str(tk, t, np - n) : NULL;
    size_t lb = before ? strlen(before) : 0;
    if (before && !strncmp(whole, before, lb))
        memmove(whole, whole + lb, strlen(whole + lb) + 1), s = whole, whole = NULL;
    else if (before) s = tok_decode_str(tk, t + np - n, n);
    free(whole), free(before), free(t);
    return s;
}

int32_t ui_loom_first_diff(const forest *f, forest_id a, forest_id b) {
    int32_t na = forest_path(f, a, NULL, 0), nb = forest_path(f, b, NULL, 0);
    if (na <= 0 || nb <= 0) return -1;
    int32_t *pa = malloc(sizeof *pa * (size_t)(na + nb)), *pb = pa + na, i = 0;
    if (!pa) return -1;
    forest_path(f, a, pa, na);
    forest_path(f, b, pb, nb);
    while (i < na && i < nb && pa[i] == pb[i]) i++;
    free(pa);
    return i == na && i == nb ? -1 : i;
}
