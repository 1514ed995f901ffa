/*
 * Who an EXEC request runs as (docs/agent.md, "USER"): the OCI spec's `user` forms (`name`, `uid`, `name:group`,
 * `uid:gid`, `name:gid`, `uid:group`) resolved against the guest's passwd and group files, parsed by hand (the
 * agent is static: no NSS). Docker's (runc's) rules: a name must be in passwd, a group name in group; a numeric uid
 * that passwd lacks runs with gid 0 and HOME "/"; without a group, the supplementary groups are those that list the
 * user's name in group; with one, there are none. No KVM, no process state: the C tests call it with files of
 * their own.
 */
#ifndef SMOL_AGENT_USER_H
#define SMOL_AGENT_USER_H

#include <stddef.h>
#include <sys/types.h>

#define USER_ID_MAX 0x7fffffffu	/* as runc: uids and gids above INT32_MAX are refused */
#define USER_MAX_GROUPS 1024	/* supplementary groups kept; more are a sign of a broken group file */

struct user_ident {
	uid_t uid;
	gid_t gid;
	gid_t *groups;		/* supplementary groups (malloc), ngroups of them */
	int ngroups;
	int named;		/* the uid is in passwd: name and home come from it */
	char name[64];
	char home[256];		/* "/" when passwd has no entry */
};

/*
 * Resolves `spec` with `etc_dir`/passwd and `etc_dir`/group. Returns 0, or -errno with a sentence in `err`
 * (`user "bob" is not in /etc/passwd`). The caller frees with user_ident_free.
 */
int user_resolve(const char *spec, const char *etc_dir, struct user_ident *u, char *err, size_t errlen);
void user_ident_free(struct user_ident *u);

#endif
