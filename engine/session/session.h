/* session.h - saving and loading a whole forest as a JSON file (with jansson): the
 * decoding settings, the identity of the model it was made with, every live node with its
 * per-node metadata, and optionally each node's top-k alternatives. Also a Markdown
 * export of the tree's texts.
 *
 * What is saved: the token structure only, never KV data. A loaded forest's nodes are all
 * pending, and the next forest step recomputes them; since a step's result for a node
 * depends only on its root-to-node path (step.h), the recomputed logits equal the ones
 * before saving (bitwise with the cpu and ref backends). Node ids are not kept: nodes are
 * rebuilt in DFS order (forest_add_root / forest_append), which preserves roots, children
 * order, tokens, depths, logprobs, flags and tags, and the file's ids map to new ones.
 *
 * The file (format "multidecode-session", version SESSION_VERSION) is one JSON object:
 *   "format", "version",
 *   "model":    {"file", "size", "sha256", "n_vocab"}  (see session_model_id),
 *   "settings": {"sampler": {"temp", "top_k", "top_p", "min_p", "seed"},
 *                "chat_template", "extra": {key: string value}},
 *   "branches": [{"leaf", "text"}]  (only when saved with a tokenizer: informational, for
 *                people reading the file; ignored when loading),
 *   "forest":   {"n_slots", "top_k", "nodes": [{"id", "parent" (-1 for a root), "token",
 *                "depth", optional "logprob" (absent when unscored), "flags" (["finished",
 *                "bookmark"]), "tag", "strategy", "seed", "name" (a branch's name, given in
 *                the TUI, absent when none), "score" (a judge's or beam's,
 *                9 significant digits, absent when none; files without it load unscored), "topk" ([[token,
 *                logprob]...])}]}
 *                with one node per line, in DFS order (loading accepts any order).
 * Floats are written as the shortest decimal that reads back as the same float.
 * Seeds are 64-bit: written as integers when below 2^63, otherwise as decimal strings.
 *
 * Saving is atomic: the JSON goes to a new file PATH.tmp.PID.N (created with O_EXCL, so
 * nothing already there, a planted link included, is ever opened), which is flushed,
 * fsync'ed and renamed over PATH, and the directory is fsync'ed; a failed save leaves any
 * old PATH intact and removes its temporary file. Loading only reads: a damaged file gives ST_ERR_FORMAT with a message
 * naming the problem (bad JSON with its line and column, a missing field or one of the
 * wrong type, an unknown parent, a parent cycle, a depth that is not its parent's + 1, a
 * token outside the vocabulary, a duplicate id) and never a crash, whatever the input.
 *
 * Not here: option parsing and model loading (app/session_opts.h), running steps. */
#ifndef MD_SESSION_H
#define MD_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/status.h"
#include "forest/forest.h"
#include "gguf/gguf.h"
#include "forest/sample.h"
#include "tok/tok.h"

#define SESSION_VERSION 1
#define SESSION_FORMAT "multidecode-session"
/* Bytes of tensor data hashed at each end of a model file. */
#define SESSION_HASH_EDGE (1u << 20)

/* ---- model identity ---- */

/* What identifies a model file cheaply (milliseconds for gigabytes). sha256 is the SHA-256
 * of these bytes of the file, in this order, each byte at most once: with D the GGUF data
 * offset (end of header, metadata, tensor infos and alignment padding) and S the file
 * size, [0, D), then [D, min(D + 1 MiB, S)) (the first MiB of tensor data), then
 * [max(D + 1 MiB, S - 1 MiB), S) (the last MiB). A file with at most 2 MiB of tensor data
 * is hashed whole. Two files match when size and sha256 agree; the file name is only for
 * messages (a renamed or moved model still matches). */
typedef struct session_model_id {
    char file[256];       /* base name of the model file, "" when unknown */
    uint64_t size;        /* file size in bytes */
    char sha256[65];      /* lower-case hex, "" when unknown */
    int32_t n_vocab;      /* tokens the model knows (0: unknown) */
} session_model_id;

/* Fills *id for an open GGUF file. path (may be NULL) gives the name (its base name is
 * kept); n_vocab the vocabulary size (0 when unknown). ST_ERR_FORMAT when the file's
 * image cannot be located (a GGUF without tensors). */
st_code session_model_id_of(const gguf_ctx *g, const char *path, int32_t n_vocab,
                            session_model_id *id, st_err *err);
/* True when a and b name the same model file (size and sha256 equal). */
bool session_model_id_same(const session_model_id *a, const session_model_id *b);
/* "NAME (SIZE bytes, sha256 12345678...)" into buf (cap > 0). Returns buf. */
const char *session_model_id_str(const session_model_id *id, char *buf, size_t cap);

/* ---- per-node metadata ---- */

/* Which strategy and seed made each node, and the score a branch's last node was given, in a table parallel to the forest and keyed by
 * forest index; an entry remembers its node's generation, so a pruned node's entry is
 * never read for the node that later reuses its index. Strategy names are short strings
 * ("cot", "beam", "ask", ...), interned. */
typedef struct session_meta session_meta;

#define SESSION_MAX_STRATEGY 63 /* bytes of a strategy name */

session_meta *session_meta_init(void); /* NULL when out of memory */
void session_meta_free(session_meta *m); /* NULL is a no-op */
/* Records strategy (copied; NULL or "" clears the entry) and seed for live node id.
 * ST_ERR_ARG for a stale id or a name over SESSION_MAX_STRATEGY bytes, ST_ERR_NOMEM. */
st_code session_meta_set(session_meta *m, const forest *f, forest_id id, const char *strategy,
                         uint64_t seed, st_err *err);
/* The entry of live node id: true and *strategy (valid while m lives) and *seed (either
 * may be NULL) when there is one; false otherwise. m may be NULL (no entries). */
bool session_meta_get(const session_meta *m, const forest *f, forest_id id,
                      const char **strategy, uint64_t *seed);
/* A score for live node id (a judge's or a beam result's, kept with the branch it ends);
 * kept beside its strategy and seed. ST_ERR_ARG for a stale id or a score that is not
 * finite, ST_ERR_NOMEM. */
st_code session_meta_set_score(session_meta *m, const forest *f, forest_id id, double score, st_err *err);
/* Node id's score into *score: false when it has none. m may be NULL. */
bool session_meta_get_score(const session_meta *m, const forest *f, forest_id id, double *score);

#define SESSION_MAX_NAME 80 /* bytes of a branch name */
/* A name for live node id (copied; NULL or "" clears it), kept beside its other entries.
 * ST_ERR_ARG for a stale id, a name over SESSION_MAX_NAME bytes or not UTF-8, ST_ERR_NOMEM. */
st_code session_meta_set_name(session_meta *m, const forest *f, forest_id id, const char *name, st_err *err);
/* Node id's name (valid while m lives and the name is not set again), NULL for none. m may
 * be NULL. */
const char *session_meta_get_name(const session_meta *m, const forest *f, forest_id id);

/* ---- settings ---- */

/* Free-form settings a session holds at most: far more than any command writes (ask's 256
 * questions, beam's results), few enough that a file cannot make loading slow. */
#define SESSION_MAX_EXTRA 4096

typedef struct session_kv {
    char *key;    /* owned */
    char *value;  /* owned */
} session_kv;

/* Everything that is not the forest. All strings are owned; free with
 * session_settings_free. */
typedef struct session_settings {
    sample_params sample;     /* the sampler the strategies used */
    char chat_template[32];   /* chat_name() of the template used, "" for none */
    char model_path[4096];    /* the model file (its base name is saved); "" unknown */
    bool save_topk;           /* save each node's top-k alternatives (default true) */
    session_kv *kv;           /* (n_kv) free-form strategy settings, in insertion order */
    int32_t n_kv;
    session_meta *meta;       /* owned, may be NULL: per-node metadata */
    char **branch_text;       /* (n_branch_text) owned: the "branches" texts a loaded file
                                 holds, in its order (the forest's leaves in DFS order);
                                 the Markdown export falls back on them without a tokenizer */
    int32_t n_branch_text;
    char warning[512];        /* set by session_load: the settings it refused and reset to
                                 their defaults (sample_param_set's messages), "" for none */
} session_settings;

/* Default sampler, no template, no keys, no metadata, save_topk true. */
session_settings session_settings_default(void);
void session_settings_free(session_settings *s); /* frees kv and meta; leaves a default */
/* Sets key to value (both copied; replaces an existing key). ST_ERR_ARG for an empty key
 * or a new key beyond SESSION_MAX_EXTRA, ST_ERR_NOMEM. */
st_code session_settings_set(session_settings *s, const char *key, const char *value,
                             st_err *err);
/* The value of key, or NULL. */
const char *session_settings_get(const session_settings *s, const char *key);

/* ---- save / load ---- */

/* Saves forest f with settings s (its meta may be NULL) and model identity mid (NULL:
 * unknown) to path, atomically (see above). tk (may be NULL) adds the informational
 * branch texts. ST_OK; ST_ERR_ARG when a node's token is outside mid's vocabulary;
 * ST_ERR_IO (naming the path and the reason; the old file untouched); ST_ERR_NOMEM. */
st_code session_save(const char *path, const forest *f, const session_settings *s,
                     const session_model_id *mid, const tok *tk, st_err *err);

typedef struct session_load_params {
    const session_model_id *model; /* the model in use; NULL: no identity check */
    bool force;       /* load even when the saved model differs from `model` */
    int32_t n_slots;  /* KV slots of the new forest (the model context's); 0: as saved */
    int32_t n_vocab;  /* tokens must be below this; 0: model->n_vocab, else the saved one */
} session_load_params;

session_load_params session_load_default_params(void);

/* Session files larger than this are refused before parsing (about 3 KiB a node with a
 * full top-k: far beyond any cache the program allocates). */
#define SESSION_MAX_FILE ((size_t)1 << 30)

/* Loads a session file into a new forest (every node pending; caller frees) and *s (a
 * fresh settings struct the caller frees, with meta filled when the file has metadata),
 * and *saved (may be NULL) the saved model identity. NULL + err: ST_ERR_IO (cannot read, not
 * a regular file, larger than SESSION_MAX_FILE),
 * ST_ERR_FORMAT (damaged: the message names the problem), ST_ERR_ARG (saved for another
 * model: the message names both; p->force loads anyway), ST_ERR_NOMEM. On failure *s and
 * *saved are left as defaults and the file is never touched. A sampler setting out of the
 * range sample_param_set accepts is not damage: it keeps its default and s->warning says
 * so. */
forest *session_load(const char *path, const session_load_params *p, session_settings *s,
                     session_model_id *saved, st_err *err);
/* The same from a JSON text in memory (len bytes). */
forest *session_load_mem(const char *json, size_t len, const session_load_params *p,
                         session_settings *s, session_model_id *saved, st_err *err);

/* ---- Markdown ---- */

/* Writes the forest's texts as Markdown to out: a title with the model, then per tree a
 * nested list in which each item is a run of single-child nodes up to a branch point (so a
 * shared prefix appears once and its continuations are nested under it), then one section
 * per root-to-leaf branch ("Branch k") giving the text it adds after the part it shares
 * with earlier branches and naming the branch it continues. Bookmarked nodes are marked
 * with a star and the word "bookmark", finished leaves with "finished", scored nodes (the
 * settings' meta) with "score S". Texts are decoded
 * with tk's streaming decoder (every node in the context of its ancestors); tk NULL writes
 * token ids instead. mid may be NULL. ST_ERR_IO when writing fails, ST_ERR_NOMEM. */
st_code session_export_markdown(FILE *out, const forest *f, const tok *tk,
                                const session_settings *s, const session_model_id *mid,
                                st_err *err);

/* session_export_markdown into the file path, written whole through base/outfile.h (a
 * link or a file that is not regular is refused, path unchanged on failure). */
st_code session_save_markdown(const char *path, const forest *f, const tok *tk,
                              const session_settings *s, const session_model_id *mid,
                              st_err *err);

#endif
