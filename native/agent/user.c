/*
 * USER of an EXEC request against the guest's passwd and group files (user.h). The files are read line by line
 * with getline (any length); a line that does not have the fields it needs is skipped, as glibc's files backend
 * skips it. NIS lines (`+`, `-`) mean nothing without NIS and are skipped too.
 */
#define _GNU_SOURCE
#include "user.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A decimal id: digits only, at most USER_ID_MAX. Returns 0 with *out, or -1. */
static int parse_id(const char *s, unsigned *out)
{
	unsigned long long v = 0;

	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		v = v * 10 + (unsigned)(*s - '0');
		if (v > USER_ID_MAX)
			return -1;
	}
	*out = (unsigned)v;
	return 0;
}

/* Splits a line (its newline dropped) at ':' into at most `max` fields; returns how many. */
static int split_fields(char *line, char **fields, int max)
{
	int n = 0;

	line[strcspn(line, "\n")] = 0;
	if (line[0] == '+' || line[0] == '-' || line[0] == '#')
		return 0;
	while (n < max) {
		fields[n++] = line;
		line = strchr(line, ':');
		if (!line)
			break;
		*line++ = 0;
	}
	return n;
}

static FILE *open_db(const char *etc_dir, const char *name, char *path, size_t pathlen)
{
	snprintf(path, pathlen, "%s/%s", etc_dir, name);
	return fopen(path, "re");
}

/* The first passwd entry whose name (or, `by_uid`, uid) matches. Returns 1 found, 0 not, -errno unreadable. */
static int passwd_find(const char *path_dir, const char *name, int by_uid, unsigned uid, struct user_ident *u,
		       char *path, size_t pathlen)
{
	FILE *f = open_db(path_dir, "passwd", path, pathlen);
	char *line = NULL, *fl[7];
	size_t cap = 0;
	int found = 0;

	if (!f)
		return -errno;
	while (!found && getline(&line, &cap, f) >= 0) {
		unsigned id, gid;
		int n = split_fields(line, fl, 7);

		if (n < 4 || parse_id(fl[2], &id) < 0 || parse_id(fl[3], &gid) < 0)
			continue;
		if (by_uid ? id != uid : strcmp(fl[0], name) != 0)
			continue;
		found = 1;
		u->uid = id;
		u->gid = gid;
		u->named = 1;
		snprintf(u->name, sizeof(u->name), "%s", fl[0]);
		snprintf(u->home, sizeof(u->home), "%s", n >= 6 && fl[5][0] ? fl[5] : "/");
	}
	free(line);
	fclose(f);
	return found;
}

static int add_group(struct user_ident *u, gid_t gid)
{
	gid_t *g;

	for (int i = 0; i < u->ngroups; i++)
		if (u->groups[i] == gid)
			return 0;
	if (u->ngroups >= USER_MAX_GROUPS)
		return 0;
	g = realloc(u->groups, sizeof(*g) * ((size_t)u->ngroups + 1));
	if (!g)
		return -ENOMEM;
	u->groups = g;
	u->groups[u->ngroups++] = gid;
	return 0;
}

static int member_of(char *members, const char *name)
{
	char *save = NULL;

	for (char *m = strtok_r(members, ",", &save); m; m = strtok_r(NULL, ",", &save))
		if (strcmp(m, name) == 0)
			return 1;
	return 0;
}

/*
 * One pass over group: with `group` set, finds its gid (1 found, 0 not); else collects the groups that list
 * u->name among their members. -errno when unreadable or out of memory.
 */
static int group_scan(const char *etc_dir, const char *group, gid_t *gid, struct user_ident *u, char *path,
		      size_t pathlen)
{
	FILE *f = open_db(etc_dir, "group", path, pathlen);
	char *line = NULL, *fl[4];
	size_t cap = 0;
	int found = 0, e = 0;

	if (!f)
		return -errno;
	while (!found && e == 0 && getline(&line, &cap, f) >= 0) {
		unsigned id;
		int n = split_fields(line, fl, 4);

		if (n < 3 || parse_id(fl[2], &id) < 0)
			continue;
		if (group) {
			if (strcmp(fl[0], group) == 0) {
				*gid = id;
				found = 1;
			}
		} else if (n == 4 && member_of(fl[3], u->name)) {
			e = add_group(u, id);
		}
	}
	free(line);
	fclose(f);
	return e < 0 ? e : found;
}

int user_resolve(const char *spec, const char *etc_dir, struct user_ident *u, char *err, size_t errlen)
{
	const char *colon = strchr(spec, ':');
	char user[256], path[4096];
	const char *group = colon ? colon + 1 : NULL;
	unsigned uid = 0, gid = 0;
	int numeric, found;

	memset(u, 0, sizeof(*u));
	snprintf(u->home, sizeof(u->home), "/");
	if ((colon ? (size_t)(colon - spec) : strlen(spec)) >= sizeof(user) || (group && strchr(group, ':'))) {
		snprintf(err, errlen, "user \"%.64s\" is not a user: expected name, uid, name:group or uid:gid", spec);
		return -EINVAL;
	}
	snprintf(user, sizeof(user), "%.*s", colon ? (int)(colon - spec) : (int)strlen(spec), spec);
	if (!user[0] || (group && !group[0])) {
		snprintf(err, errlen, "user \"%.64s\" is not a user: expected name, uid, name:group or uid:gid", spec);
		return -EINVAL;
	}
	numeric = parse_id(user, &uid) == 0;
	if (!numeric && strspn(user, "0123456789") == strlen(user)) {
		snprintf(err, errlen, "user \"%.64s\": uid %s is out of range (at most %u)", spec, user, USER_ID_MAX);
		return -EINVAL;
	}
	found = passwd_find(etc_dir, user, numeric, uid, u, path, sizeof(path));
	if (found <= 0 && !numeric) {
		if (found < 0)
			snprintf(err, errlen, "user \"%.64s\" is not in %s (cannot read it: %s)", user, path,
				 strerror(-found));
		else
			snprintf(err, errlen, "user \"%.64s\" is not in %s", user, path);
		return -ENOENT;
	}
	if (found <= 0) {	/* a uid passwd does not know: that uid, gid 0, HOME / (docker's behaviour) */
		u->uid = uid;
		u->gid = 0;
	}
	if (group) {
		if (parse_id(group, &gid) == 0) {
			u->gid = gid;
			return 0;
		}
		if (strspn(group, "0123456789") == strlen(group)) {
			snprintf(err, errlen, "user \"%.64s\": gid %s is out of range (at most %u)", spec, group,
				 USER_ID_MAX);
			return -EINVAL;
		}
		found = group_scan(etc_dir, group, &u->gid, u, path, sizeof(path));
		if (found <= 0) {
			if (found < 0 && found != -ENOMEM)
				snprintf(err, errlen, "group \"%.64s\" is not in %s (cannot read it: %s)", group, path,
					 strerror(-found));
			else if (found == -ENOMEM)
				snprintf(err, errlen, "out of memory reading %s", path);
			else
				snprintf(err, errlen, "group \"%.64s\" is not in %s", group, path);
			return found == -ENOMEM ? -ENOMEM : -ENOENT;
		}
		return 0;
	}
	if (u->named) {
		/* A missing group file means no supplementary groups, as for glibc's initgroups. */
		found = group_scan(etc_dir, NULL, NULL, u, path, sizeof(path));
		if (found == -ENOMEM) {
			user_ident_free(u);
			snprintf(err, errlen, "out of memory reading %s", path);
			return -ENOMEM;
		}
	}
	return 0;
}

void user_ident_free(struct user_ident *u)
{
	free(u->groups);
	u->groups = NULL;
	u->ngroups = 0;
}
