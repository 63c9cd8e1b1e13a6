/* prefill.c - several prompts under one shared context (see prefill.h). */
#include "forest/prefill.h"

#include <stdlib.h>

st_code prefill_prompts(forest *f, const int32_t *ctx, int32_t n_ctx,
                        const int32_t *const *prompts, const int32_t *lens, int32_t n,
                        forest_id *leaves_out, st_err *err) {
    if (n < 1 || n_ctx < 0 || (n_ctx > 0 && !ctx))
        return st_set(err, ST_ERR_ARG, "prefill: need at least one prompt and a valid context");
    for (int32_t i = 0; i < n; i++) {
        if (lens[i] < 0 || (lens[i] > 0 && !prompts[i]))
            return st_set(err, ST_ERR_ARG, "prefill: prompt %d has a bad length or no tokens", i);
        if (lens[i] == 0 && n_ctx == 0)
            return st_set(err, ST_ERR_ARG, "prefill: prompt %d is empty and there is no context", i);
    }
    forest_id root_last = FOREST_NONE;
    st_code rc = ST_OK;
    if (n_ctx > 0 && (rc = forest_add_root(f, ctx, NULL, n_ctx, 0, &root_last, err))) return rc;
    int32_t added = 0;
    for (; added < n; added++) {
        forest_id leaf = root_last;
        if (lens[added] > 0)
            rc = n_ctx > 0 ? forest_append(f, root_last, prompts[added], NULL, lens[added], &leaf, err)
                           : forest_add_root(f, prompts[added], NULL, lens[added], 0, &leaf, err);
        if (rc) break;
        leaves_out[added] = leaf;
    }
    if (rc) { /* undo: the context root takes its children with it; lone roots one by one */
        st_err ignore = {0};
        if (n_ctx > 0) {
            forest_id root = root_last;
            for (const forest_node *nd = forest_get(f, root); nd && nd->parent >= 0;
                 nd = forest_get(f, root))
                root = forest_id_at(f, nd->parent);
            forest_prune(f, root, &ignore);
        } else {
            for (int32_t i = 0; i < added; i++) {
                forest_id root = leaves_out[i];
                for (const forest_node *nd = forest_get(f, root); nd && nd->parent >= 0;
                     nd = forest_get(f, root))
                    root = forest_id_at(f, nd->parent);
                forest_prune(f, root, &ignore);
            }
        }
        return rc;
    }
    for (int32_t i = 0; i < n; i++)
        if (lens[i] == 0) forest_set_flags(f, root_last, FOREST_WANT_LOGITS, 0);
    return ST_OK;
}
