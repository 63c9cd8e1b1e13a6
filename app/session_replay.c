/* session_replay.c - settings for --save and the --load replay of the decoding commands
 * (see session_replay.h). */
#include "base/clock.h"
#include "session_replay.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strategy/merge.h"
#include "forest/step.h"
#include "app.h"
#include "json_out.h"

st_code app_session_settings(session_settings *s, const char *cmd, const char *mpath,
                             const sample_params *sp, chat_kind kind, st_err *err) {
    *s = session_settings_default();
    if (sp) s->sample = *sp;
    if (kind != CHAT_NONE) snprintf(s->chat_template, sizeof s->chat_template, "%s", chat_name(kind));
    if (mpath) snprintf(s->model_path, sizeof s->model_path, "%s", mpath);
    if (!(s->meta = session_meta_init())) return st_set(err, ST_ERR_NOMEM, "out of memory");
    return session_settings_set(s, "command", cmd, err);
}

st_code app_session_set_int(session_settings *s, const char *key, int64_t v, st_err *err) {
    char text[24];
    snprintf(text, sizeof text, "%lld", (long long)v);
    return session_settings_set(s, key, text, err);
}

st_code app_session_mark(session_settings *s, const forest *f, forest_id from, forest_id leaf,
                         const char *strategy, uint64_t seed, st_err *err) {
    int32_t stop = from == FOREST_NONE ? -1 : forest_index(from);
    if (!forest_get(f, leaf)) return st_set(err, ST_ERR_ARG, "a stale branch");
    for (int32_t i = forest_index(leaf); i >= 0 && i != stop; i = forest_node_at(f, i)->parent) {
        st_code rc = session_meta_set(s->meta, f, forest_id_at(f, i), strategy, seed, err);
        if (rc) return rc;
    }
    return ST_OK;
}

/* The deepest node of leaf's path that is not generated (the prompt's end), or
 * FOREST_NONE when the whole path is generated. */
static forest_id prompt_end(const forest *f, forest_id leaf) {
    int32_t i = forest_index(leaf);
    while (i >= 0 && !isnan(forest_node_at(f, i)->logprob)) i = forest_node_at(f, i)->parent;
    return i >= 0 ? forest_id_at(f, i) : FOREST_NONE;
}

/* The last up to `max` bytes of text (on a character boundary), for a prompt's end. */
static const char *tail_of(const char *s, size_t max) {
    size_t n = strlen(s);
    if (n <= max) return s;
    const char *p = s + n - max;
    while (*p && ((unsigned char)*p & 0xC0) == 0x80) p++;
    return p;
}

/* Branch k of a replay, ending at leaf: its object appended to *list, or with list NULL
 * its text on stdout. ST_ERR_NOMEM. */
static st_code replay_branch(const forest *f, const tok *tk, const session_settings *s, int32_t k,
                             forest_id leaf, json_t **list, st_err *err) {
    forest_id pe = prompt_end(f, leaf);
    char *ptxt = pe == FOREST_NONE ? NULL : merge_branch_text(f, tk, FOREST_NONE, pe, err);
    char *gtxt = merge_branch_text(f, tk, pe, leaf, err);
    if ((pe != FOREST_NONE && !ptxt) || !gtxt) {
        free(ptxt), free(gtxt);
        return err->code;
    }
    int32_t depth = forest_path(f, leaf, NULL, 0);
    int32_t n_gen = depth - (pe == FOREST_NONE ? 0 : forest_path(f, pe, NULL, 0));
    bool fin = forest_get(f, leaf)->flags & FOREST_FINISHED;
    const char *strategy = NULL;
    session_meta_get(s->meta, f, leaf, &strategy, NULL);
    if (list) {
        json_t *b = json_object();
        jo_set(&b, "branch", json_integer(k));
        jo_set(&b, "tokens", json_integer(depth));
        jo_set(&b, "generated", json_integer(n_gen));
        jo_set(&b, "finished", json_boolean(fin));
        jo_set(&b, "strategy", jo_str(strategy));
        jo_set(&b, "prompt", jo_str(ptxt));
        jo_set(&b, "text", jo_str(gtxt));
        jo_push(list, b);
    } else {
        printf("--- branch %d (%d tokens, %d generated%s%s%s)\n", k, depth, n_gen,
               fin ? ", finished" : "", strategy ? ", by " : "", strategy ? strategy : "");
        if (ptxt) {
            printf("... ");
            prompt_show_str(stdout, tail_of(ptxt, 80), 0);
            printf("\n");
        }
        printf("%s\n", gtxt);
    }
    free(ptxt), free(gtxt);
    return ST_OK;
}

int app_session_replay(const char *cmd, const app_session_opts *so, const prompt_model_opts *mo,
                       bool json, bool quiet) {
    st_err err = {0};
    prompt_model pm;
    if (prompt_model_open(&pm, mo, &err)) return app_fail(&err);
    session_settings s;
    forest *f = app_session_load(so->load, pm.m, mo->path, pm.n_slots, so->force, &s, &err);
    if (f) app_session_warn(so->load, &s);
    step_plan plan;
    step_plan_init(&plan);
    forest_id *leaves = NULL;
    st_code rc = f ? ST_OK : err.code;
    if (rc) goto out;
    const char *saved_cmd = session_settings_get(&s, "command");
    if (!quiet && saved_cmd && strcmp(saved_cmd, cmd))
        fprintf(stderr, "multidecode: note: session '%s' was saved by '%s', not '%s'\n", so->load,
                saved_cmd, cmd);
    /* recompute: every node is pending, one step computes them all (bitwise the logits
     * the run had, step.h) */
    int32_t n_nodes = forest_n_live(f);
    double t0 = mono_now_s();
    if ((rc = step_forest(f, &plan, pm.ctx, &err))) goto out;
    double t1 = mono_now_s();
    int32_t n_leaves = forest_leaves(f, NULL, 0);
    leaves = malloc(sizeof *leaves * (size_t)(n_leaves > 0 ? n_leaves : 1));
    if (!leaves) {
        rc = st_set(&err, ST_ERR_NOMEM, "out of memory");
        goto out;
    }
    forest_leaves(f, leaves, n_leaves);
    json_t *list = json ? json_array() : NULL;
    for (int32_t k = 0; k < n_leaves && !rc; k++)
        rc = replay_branch(f, pm.tk, &s, k, leaves[k], json ? &list : NULL, &err);
    if (rc) {
        json_decref(list);
        goto out;
    }
    if (json) {
        json_t *doc = json_object();
        jo_set(&doc, "session", jo_str(so->load));
        jo_set(&doc, "command", jo_str(saved_cmd));
        jo_set(&doc, "nodes", json_integer(n_nodes));
        jo_set(&doc, "branches", list);
        if ((rc = jo_print(doc, &err))) goto out;
    }
    fflush(stdout);
    if (!quiet)
        fprintf(stderr, "%s --load: session '%s': %d nodes recomputed in one step (%d rows) in "
                "%.3f s; %d branches; KV slots used %d\n", cmd, so->load, n_nodes, plan.n_rows,
                t1 - t0, n_leaves, kv_alloc_used(forest_kv(f)));
out:
    free(leaves);
    step_plan_free(&plan);
    forest_free(f);
    session_settings_free(&s);
    prompt_model_close(&pm);
    return rc ? app_fail(&err) : 0;
}
