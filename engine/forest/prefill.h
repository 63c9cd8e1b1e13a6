/* prefill.h - multi-prompt prefill: several prompts under one shared context, laid out so
 * that one forest step computes them all.
 *
 * The context is one root chain at positions 0..c-1; each prompt i is a child chain of
 * its last node, so its tokens continue at positions c, c+1, ... exactly as if it had been
 * appended to the context alone. The context is stored and computed once: the step uses
 * n_ctx + sum(lens) KV slots, and each prompt's last node gets the logits of decoding
 * "context + prompt i" linearly (step.h). This only adds nodes; the caller runs the step
 * (step_forest, grow_step...). Not here: finding a shared prefix in full prompts (the
 * caller passes the split it wants; app/cmd_ask.c finds the longest common prefix). */
#ifndef MD_PREFILL_H
#define MD_PREFILL_H

#include <stdint.h>

#include "forest/forest.h"

/* Adds the context ctx[0..n_ctx) as a root chain at position 0 and each prompts[i]
 * (lens[i] tokens) as a chain under its last node; leaves_out[i] (n entries) gets
 * prompt i's last node. A prompt of 0 tokens asks for the context's own logits: its leaf
 * is the context's last node, flagged FOREST_WANT_LOGITS. With n_ctx = 0 every prompt is
 * its own root at position 0 (and needs lens[i] >= 1). ST_OK; ST_ERR_ARG (n < 1, negative
 * lengths, NULL prompts of nonzero length, nothing to add); ST_ERR_NOMEM, with the forest
 * unchanged. */
st_code prefill_prompts(forest *f, const int32_t *ctx, int32_t n_ctx,
                        const int32_t *const *prompts, const int32_t *lens, int32_t n,
                        forest_id *leaves_out, st_err *err);

#endif
