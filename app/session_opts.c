/* session_opts.c - the --save / --load glue between the decoding commands and
 * engine/session/session.h: option handling and the model identity of a loaded model. */
#include "session_opts.h"

int app_session_opt(app_session_opts *o, int ch, const char *arg) {
    switch (ch) {
    case APP_SESSION_OPT_SAVE: o->save = arg; return 0;
    case APP_SESSION_OPT_LOAD: o->load = arg; return 0;
    case APP_SESSION_OPT_FORCE: o->force = true; return 0;
    default: return -1;
    }
}

/* The identity of m, named after path ("" / NULL: unnamed). */
static st_code app_session_model_id(const model *m, const char *path, session_model_id *id,
                                    st_err *err) {
    return session_model_id_of(m->gguf, path && *path ? path : NULL, m->hp.n_vocab, id, err);
}

int app_session_save(const char *path, const forest *f, const model *m, const tok *tk,
                     const session_settings *s, st_err *err) {
    session_model_id id;
    st_code rc;
    if (m && (rc = app_session_model_id(m, s->model_path, &id, err))) return rc;
    rc = session_save(path, f, s, m ? &id : NULL, tk, err);
    if (rc) st_prefix(err, "saving session '%s'", path);
    return rc;
}

forest *app_session_load(const char *path, const model *m, const char *model_path,
                         int32_t n_slots, bool force, session_settings *s, st_err *err) {
    session_model_id id;
    session_load_params p = session_load_default_params();
    if (m) {
        if (app_session_model_id(m, model_path, &id, err)) {
            *s = session_settings_default();
            return NULL;
        }
        p.model = &id;
        p.n_vocab = m->hp.n_vocab;
    }
    p.force = force;
    p.n_slots = n_slots;
    forest *f = session_load(path, &p, s, NULL, err);
    if (f && n_slots > 0 && forest_n_live(f) > n_slots) {
        st_set(err, ST_ERR_CONTEXT, "session '%s' has %d tokens but the KV cache holds %d; "
               "raise it with -c", path, forest_n_live(f), n_slots);
        forest_free(f);
        session_settings_free(s);
        return NULL;
    }
    return f;
}

void app_session_warn(const char *path, const session_settings *s) {
    if (s->warning[0]) fprintf(stderr, "multidecode: warning: session '%s': %s\n", path, s->warning);
}
