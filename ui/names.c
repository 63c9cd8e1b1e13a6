/* names.c - branch names as session metadata (names.h). */
#include "names.h"

st_code ui_names_copy(session_meta *dst, const session_meta *src, const forest *f, st_err *err) {
    for (int32_t i = forest_dfs_first(f); src && i >= 0; i = forest_dfs_next(f, i)) {
        const char *name = session_meta_get_name(src, f, forest_id_at(f, i));
        if (name && session_meta_set_name(dst, f, forest_id_at(f, i), name, err)) return err->code;
    }
    return ST_OK;
}
