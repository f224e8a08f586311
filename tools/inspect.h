/* inspect.h - `cleave inspect`: one printer per file kind.
 * Each prints a table (or JSON with as_json) to stdout and returns an exit
 * status; the file has already been recognised by its "format" member. */
#ifndef CL_INSPECT_H
#define CL_INSPECT_H

int inspect_model(const char *path, int as_json);     /* tools/inspect_model.c   */
int inspect_cluster(const char *path, int as_json);   /* tools/inspect_cluster.c */
int inspect_devices(const char *path, int as_json);   /* tools/inspect_cluster.c (presets) */
int inspect_profile(const char *path, int as_json);
int inspect_plan(const char *path, int as_json);        /* tools/inspect_plan.c    */   /* tools/inspect_profile.c (also PipeDream .txt) */

#endif
