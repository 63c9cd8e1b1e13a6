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

st_code ui_loom_write(forest *f, const tok *tk, forest_id node, const char *text, forest_id *leaf, bool *made,
                      st_err *err) {
    *made = false;
    if (node != FOREST_NONE && !forest_get(f, node)) return st_set(err, ST_ERR_ARG, "the selected node is gone");
    int32_t n, *t = write_tokens(tk, node, text, &n, err), i = 0;
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

char *ui_loom_line_text(const forest *f, const tok *tk, int32_t start, int32_t end) {
    int32_t n = forest_node_at(f, end)->depth - forest_node_at(f, start)->depth + 1;
    if (n <= 0) return NULL;
    int32_t *t = malloc(sizeof *t * (size_t)n), at = end;
    if (!t) return NULL;
    for (int32_t k = n - 1; k >= 0; k--, at = forest_node_at(f, at)->parent) t[k] = forest_node_at(f, at)->token;
    char *s = at == forest_node_at(f, start)->parent ? tok_decode_str(tk, t, n) : NULL;
    free(t);
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
