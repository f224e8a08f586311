/* spawn.h - start a program without a shell (prefix cl_spawn).
 *
 * cleave never hands a command line to a shell (no system(), no popen()):
 * paths and names in it could hold ; ` $( or a space.  Programs are started
 * with an argv array, every argument passed as it is.
 */
#ifndef CL_SPAWN_H
#define CL_SPAWN_H

/* Run argv[0] (found on PATH) with argv (NULL-terminated) and wait for it.
 * out_path NULL: the child shares stdout and stderr; else both go to that
 * file (created mode 0600 or truncated).  Returns the wait status
 * (WIFEXITED...), or -1 when it could not start (errno set; ENOENT: not
 * found). */
int cl_spawn_wait(char *const argv[], const char *out_path);
/* The same with stderr into err_path of its own (NULL: with stdout, as
 * cl_spawn_wait), so a document the child prints on stdout cannot be cut
 * by a warning written at the same time. */
int cl_spawn_wait_err(char *const argv[], const char *out_path, const char *err_path);

#endif
