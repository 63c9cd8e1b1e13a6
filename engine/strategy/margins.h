/* margins.h - Writing in the Margins (Russak et al. 2024) over one forest: a long context
 * is split into chunks; every chunk gets a branch that writes a short note about the
 * question, all notes growing together (one shared step per token); then a final branch
 * answers with the notes merged into its context.
 *
 * Layout: the caller gives each chunk's whole note prompt (instruction, chunk i, the note
 * request; rendered with a chat template or not: this module sees tokens only). Their
 * longest common prefix (the instruction, usually) becomes one root chain, stored and
 * computed once; each prompt's rest (chunk i, then the note request) hangs under it
 * (prefill.h), so the first step prefills every chunk at once and each note is exactly
 * what decoding its own prompt alone would write (grow.h). The final answer prompt (the
 * caller builds it around merge_join_text of the notes: margins_notes_text) hangs under
 * the deepest node of the shared prefix it starts with, as an exact merge does (merge.h):
 * a re-prefill of the notes' text. The EXPERIMENTAL alternative margins_answer_gap reads
 * the note branches' K/V where they are (chunk, note request and note, side by side:
 * merge.h's rope-gap) instead of re-prefilling their text.
 *
 * Phases: MARGINS_NOTES (margins_step grows the notes) until every note is done, then
 * MARGINS_READY (the caller calls margins_answer or margins_answer_gap), then
 * MARGINS_ANSWER (margins_step grows the answer), then MARGINS_DONE. The caller owns the
 * forest, the plan and the model context. The wording of the note and answer requests
 * (margins_note_prompt, margins_answer_prompt) is here so that `multidecode margins` and
 * the TUI's :margins ask the same; not here: splitting text into chunks, rendering the
 * requests with a chat template and tokenising them (app/cmd_margins.c, ui/). */
#ifndef MD_MARGINS_H
#define MD_MARGINS_H

#include <stdbool.h>
#include <stdint.h>

#include "strategy/grow.h"
#include "strategy/merge.h"

enum { MARGINS_NOTES = 0, MARGINS_READY, MARGINS_ANSWER, MARGINS_DONE };

/* The most chunks (notes) one run takes, for the CLI and the TUI alike: the hosts keep
 * one prompt per chunk in arrays of this size. */
#define MARGINS_MAX_CHUNKS 1024

typedef struct margins {
    int32_t phase;         /* MARGINS_* */
    int32_t n_chunks;
    int32_t n_shared;      /* tokens of the shared prefix (0: none) */
    forest_id shared;      /* its last node, FOREST_NONE when none */
    forest_id *note_from;  /* (n_chunks) the last node of chunk i's prompt */
    grow notes;            /* branch i writes chunk i's note */
    grow answer;           /* one branch, from margins_answer on */
    forest_id answer_from; /* the last node of the answer prompt */
    merge_gap *gap;        /* the rope-gap answer (EXPERIMENTAL), NULL otherwise */
    int32_t n_gap_notes;   /* the notes the rope-gap answer reads (it stops when one goes) */
    bool answer_cut;       /* the answer stopped: a note it read was pruned (margins_forget) */
    int32_t n_vocab;
} margins;

/* Adds the note prompts prompts[i] (lens[i] >= 1 tokens each, n_chunks >= 1) to f as
 * described above and prepares note i to grow from its prompt with sp and seed
 * sp->seed + i, at most note_tokens tokens. ST_ERR_ARG, ST_ERR_NOMEM; on failure the
 * forest is unchanged and m is zeroed (margins_free is safe). */
st_code margins_init(margins *m, forest *f, const int32_t *const *prompts, const int32_t *lens,
                     int32_t n_chunks, const sample_params *sp, int32_t note_tokens,
                     int32_t n_vocab, st_err *err);
void margins_free(margins *m); /* zeroed or initialised; leaves the forest as it is */

/* The host pruned nodes of f between two steps: a note whose leaf went is dropped (ends
 * STRAT_END_PRUNED, left out of the notes' text and of a rope-gap answer); with every
 * note gone there is no answer; an answer whose leaf went, or a rope-gap answer that lost
 * a note it reads, ends the run. */
void margins_forget(margins *m, const forest *f);

/* Stop strings for the notes (grow_set_stop). */
st_code margins_set_note_stop(margins *m, const char *const *stops, int32_t n, st_err *err);

/* One forest step of the current phase: MARGINS_NOTES grows every running note (the
 * first step also prefills the context and every chunk), MARGINS_ANSWER grows the
 * answer (with the rope-gap step for margins_answer_gap). emit gets (branch, token,
 * logprob): the note's index, or n_chunks for the answer. *active (may be NULL) gets the
 * branches still running. ST_OK (a no-op in MARGINS_READY / DONE); ST_NO_KV_SLOT with
 * nothing changed; other codes from the step. */
st_code margins_step(margins *m, forest *f, step_plan *p, model_ctx *c, const tok *tk,
                     grow_emit_fn emit, void *ud, int32_t *active, st_err *err);

/* The text of note i (what its branch wrote, decoded): malloc'd, caller frees. */
char *margins_note_text(const margins *m, const forest *f, const tok *tk, int32_t i, st_err *err);
/* Every note's text but the pruned (margins_forget) joined with sep (NULL: "\n\n"), as
 * merge_join_text: malloc'd; ST_ERR_ARG when every note was pruned. */
char *margins_notes_text(const margins *m, const forest *f, const tok *tk, const char *sep,
                         st_err *err);

/* Starts the answer (phase MARGINS_READY): the answer prompt tokens[0..n) (usually a
 * chat-rendered "instruction + notes + question"; it shares the leading tokens it has in
 * common with the shared prefix) hang under the deepest shared-prefix node they start
 * with; the answer grows from its last node with sp, at most budget tokens. ST_ERR_ARG
 * (wrong phase, a prompt that adds nothing after the shared prefix), ST_ERR_NOMEM. */
st_code margins_answer(margins *m, forest *f, const int32_t *tokens, int32_t n,
                       const sample_params *sp, int32_t budget, st_err *err);

/* EXPERIMENTAL: starts the answer without re-prefilling the notes: tail[0..n) (the
 * question after the notes) continues the longest note branch at positions + gap and
 * attends to every note branch's K/V (merge_gap_init over the notes' leaves). Computes
 * the notes' last tokens first when pending (one plain step over p and c). Then
 * margins_step grows the answer with merge_gap_step. Same codes as margins_answer. */
st_code margins_answer_gap(margins *m, forest *f, step_plan *p, model_ctx *c,
                           const int32_t *tail, int32_t n, int32_t gap,
                           const sample_params *sp, int32_t budget, st_err *err);

bool margins_done(const margins *m);

/* The requests, as text (malloc'd, caller frees; NULL when out of memory). With chat
 * (the text becomes a chat user message): "Question: Q\n\nHere is one part of a longer
 * text:\n\nCHUNK\n\nWrite a short note with what this part says about the question. If
 * it says nothing about it, say so." and "Question: Q\n\nNotes taken on the parts of a
 * longer text:\n\nNOTES\n\nAnswer the question using the notes."; without (a plain
 * completion prompt): "Question: Q\n\nText: CHUNK\n\nNote:" and "Question: Q\n\nNotes:
 * \nNOTES\n\nAnswer:". */
char *margins_note_prompt(const char *question, const char *chunk, bool chat);
char *margins_answer_prompt(const char *question, const char *notes, bool chat);
/* Chunk i's request over a text of n_ctx tokens cut into pieces of chunk tokens (the
 * last may be shorter): the piece decoded from its start (tok_decode_str), in
 * margins_note_prompt's form. The one way the CLI and the TUI cut a text into notes. */
char *margins_chunk_prompt(const tok *tk, const int32_t *ctx, int32_t n_ctx, int32_t chunk, int32_t i,
                           const char *question, bool chat);

#endif
