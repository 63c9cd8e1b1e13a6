/* spec_job.h - what the TUI adds to :draft and :lookahead (the "draft" and "lookahead"
 * strategies of engine/strategy/strategy.h, run by the worker like every strategy): their
 * parameters (with the TUI's sampling), and the mask pane of their steps. The mask pane (mask_view.h) shows each
 * step's layout as it ran: the spec driver's observer captures the plan after the forward
 * pass and before acceptance prunes, with each row's role (tip, draft, window cell
 * "la l,i") snapshotted (ui_spec_capture); after acceptance the worker marks the drafts
 * accepted or rejected (mv_resolve_drafts). Not here: the job queue (worker.c), the
 * stepping and stop rules (engine/strategy/draft.c), the verification (engine/spec/spec.c). */
#ifndef MD_UI_SPEC_JOB_H
#define MD_UI_SPEC_JOB_H

#include <stdbool.h>
#include <stdint.h>

#include "spec/spec.h"
#include "tok/tok.h"
#include "mask_view.h"

/* The parameters of :draft (w == 0) or :lookahead W N G: spec_default_params with the
 * window's W, N, G; the adaptive policy's row cost is measured from the steps' timings
 * (the worker fixes it when the TUI was started with --row-cost, so that a layout, the
 * tmux test's golden screens among them, does not depend on the machine's speed). */
spec_params ui_spec_params(int32_t w, int32_t n, int32_t g);

/* The sampling of :draft and :lookahead: the TUI's sampler settings (:set temp, top_k,
 * ...) as the drafts' target, so temp > 0 is exact speculative sampling (engine/spec/
 * spec_sample.h: the tokens are plain sampling's with the same settings and seed, as
 * `generate --draft --temp T` gives) and temp 0 greedy decoding. */
void ui_spec_set_sampling(spec_params *p, const sample_params *sp);

/* The mask view of a speculative step: mv_capture of p, then each row's role from
 * spec_node_role. Call from the observer (before acceptance prunes). */
void ui_spec_capture(mask_view *v, const spec *s, const forest *f, const tok *tk, const step_plan *p,
                     int32_t step);

#endif
