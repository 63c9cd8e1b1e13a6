/* tour.h - the guided tour (teaching): builds a small forest step by step on a model (a
 * prompt and its prefill; a fork into the model's two likeliest next tokens; one more
 * token on each branch) and writes a screen of text for each part: what the rows, RoPE
 * positions, KV slots, mask and attention weights of the forest built mean, naming its
 * real rows, and how RoPE turns them. The TUI pages through the screens (:tour) and
 * `multidecode tour` prints them. Not here: drawing, keys. */
#ifndef MD_UI_TOUR_H
#define MD_UI_TOUR_H

#include <stdint.h>

#include "base/status.h"
#include "forest/forest.h"
#include "mask_view.h"
#include "model/model.h"
#include "tok/tok.h"

#define TOUR_STEPS 3 /* prefill, fork, grow */

typedef struct tour tour;

/* Runs the tour's steps on c, whose KV cache must be unused (the tour takes its slots
 * from 0; the caller frees c when it likes: the tour keeps what it shows), with prompt as
 * raw text (BOS added as the model says) and the attention weights of the last layer,
 * mean of heads. NULL + err: ST_ERR_ARG (an empty prompt, or one longer than the cache
 * minus the steps), ST_ERR_NOMEM, or what a step returned. tk is borrowed for the call. */
tour *tour_build(model_ctx *c, const tok *tk, const char *prompt, st_err *err);
void tour_free(tour *t); /* NULL is a no-op */

int32_t tour_n_screens(const tour *t);
/* Screen i (0 .. tour_n_screens - 1): a title line, then lines of at most 80 columns,
 * '\n'-separated; NULL out of range. Owned by the tour. */
const char *tour_screen(const tour *t, int32_t i);
/* What the screens describe: the forest built and step s's capture (0 prefill, 1 fork,
 * 2 grow), for checking them. */
const forest *tour_forest(const tour *t);
const mask_view *tour_step(const tour *t, int32_t s);

#endif
