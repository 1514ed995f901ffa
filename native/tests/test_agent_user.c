/* EXEC's USER (native/agent/user.c): the OCI spec's forms against passwd and group files written by the test. */
#include "test.h"
#include "user.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const char PASSWD[] =
	"root:x:0:0:root:/root:/bin/sh\n"
	"# a comment\n"
	"+nis-entry::::::\n"
	"broken line without colons\n"
	"daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
	"app:x:1000:1000:The App:/home/app:/bin/sh\n"
	"nohome:x:1001:1001::\n"
	"dup:x:1000:50::/first:/bin/sh\n";

static const char GROUP[] =
	"root:x:0:\n"
	"app:x:1000:\n"
	"wheel:x:10:root,app\n"
	"staff:x:50:daemon,app\n"
	"audio:x:29:nohome\n"
	"no-members:x:70\n";

/* A directory with passwd and group (either may be NULL: not written). */
static const char *etc_with(const char *passwd, const char *group)
{
	static char dir[TEST_PATH_MAX];
	char path[TEST_PATH_MAX + 16];
	static int n;
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/etc-%d-%d", test_tmpdir(), (int)getpid(), n++); /* each test is a process */
	if (mkdir(dir, 0755) < 0)
		return NULL;
	if (passwd) {
		snprintf(path, sizeof(path), "%s/passwd", dir);
		f = fopen(path, "w");
		if (!f)
			return NULL;
		fputs(passwd, f);
		fclose(f);
	}
	if (group) {
		snprintf(path, sizeof(path), "%s/group", dir);
		f = fopen(path, "w");
		if (!f)
			return NULL;
		fputs(group, f);
		fclose(f);
	}
	return dir;
}

static int has_group(const struct user_ident *u, gid_t gid)
{
	for (int i = 0; i < u->ngroups; i++)
		if (u->groups[i] == gid)
			return 1;
	return 0;
}

TEST(agent_user_name_takes_uid_gid_home_and_its_groups_from_the_files)
{
	const char *etc = etc_with(PASSWD, GROUP);
	struct user_ident u;
	char err[256] = "";

	REQUIRE(etc);
	CHECK_OK(user_resolve("app", etc, &u, err, sizeof(err)), err);
	CHECK_EQ_INT(u.uid, 1000);
	CHECK_EQ_INT(u.gid, 1000);
	CHECK(u.named);
	CHECK(strcmp(u.name, "app") == 0);
	CHECK(strcmp(u.home, "/home/app") == 0);
	CHECK_EQ_INT(u.ngroups, 2);
	CHECK(has_group(&u, 10) && has_group(&u, 50));
	user_ident_free(&u);

	CHECK_OK(user_resolve("nohome", etc, &u, err, sizeof(err)), err);
	CHECK(strcmp(u.home, "/") == 0);
	CHECK_EQ_INT(u.ngroups, 1);
	CHECK(has_group(&u, 29));
	user_ident_free(&u);
}

TEST(agent_user_uid_matches_the_first_passwd_entry_or_runs_with_gid_0)
{
	const char *etc = etc_with(PASSWD, GROUP);
	struct user_ident u;
	char err[256] = "";

	REQUIRE(etc);
	CHECK_OK(user_resolve("1000", etc, &u, err, sizeof(err)), err);
	CHECK(u.named && strcmp(u.name, "app") == 0);
	CHECK_EQ_INT(u.gid, 1000);
	CHECK_EQ_INT(u.ngroups, 2);
	user_ident_free(&u);

	/* docker's behaviour: a uid passwd lacks is that uid with gid 0, HOME /, no groups */
	CHECK_OK(user_resolve("4242", etc, &u, err, sizeof(err)), err);
	CHECK_EQ_INT(u.uid, 4242);
	CHECK_EQ_INT(u.gid, 0);
	CHECK(!u.named);
	CHECK(strcmp(u.home, "/") == 0);
	CHECK_EQ_INT(u.ngroups, 0);
	user_ident_free(&u);

	CHECK_OK(user_resolve("0", etc, &u, err, sizeof(err)), err);
	CHECK(u.uid == 0 && u.gid == 0 && strcmp(u.home, "/root") == 0);
	user_ident_free(&u);
}

TEST(agent_user_with_a_group_takes_that_gid_and_no_supplementary_groups)
{
	const char *etc = etc_with(PASSWD, GROUP);
	struct user_ident u;
	char err[256] = "";

	REQUIRE(etc);
	CHECK_OK(user_resolve("app:staff", etc, &u, err, sizeof(err)), err);
	CHECK(u.uid == 1000 && u.gid == 50 && u.ngroups == 0);
	user_ident_free(&u);
	CHECK_OK(user_resolve("app:777", etc, &u, err, sizeof(err)), err);
	CHECK(u.uid == 1000 && u.gid == 777 && u.ngroups == 0);
	user_ident_free(&u);
	CHECK_OK(user_resolve("4242:wheel", etc, &u, err, sizeof(err)), err);
	CHECK(u.uid == 4242 && u.gid == 10);
	user_ident_free(&u);
	CHECK_OK(user_resolve("4242:4343", etc, &u, err, sizeof(err)), err);
	CHECK(u.uid == 4242 && u.gid == 4343);
	user_ident_free(&u);
}

TEST(agent_user_unknown_names_and_bad_forms_are_errors_naming_them)
{
	const char *etc = etc_with(PASSWD, GROUP);
	char want[TEST_PATH_MAX + 64];
	struct user_ident u;
	char err[256] = "";

	REQUIRE(etc);
	CHECK_EQ_INT(user_resolve("bob", etc, &u, err, sizeof(err)), -ENOENT);
	snprintf(want, sizeof(want), "user \"bob\" is not in %s/passwd", etc);
	CHECK(strcmp(err, want) == 0);
	CHECK_EQ_INT(user_resolve("app:nogroup", etc, &u, err, sizeof(err)), -ENOENT);
	snprintf(want, sizeof(want), "group \"nogroup\" is not in %s/group", etc);
	CHECK(strcmp(err, want) == 0);
	CHECK_EQ_INT(user_resolve("bob:staff", etc, &u, err, sizeof(err)), -ENOENT);
	CHECK_STR_CONTAINS(err, "user \"bob\"");

	const char *bad[] = { "", ":", "app:", ":staff", "a:b:c", "99999999999", "app:99999999999", "-1" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int e = user_resolve(bad[i], etc, &u, err, sizeof(err));

		if (e != -EINVAL && e != -ENOENT)
			test_fail(__FILE__, __LINE__, "\"%s\" gave %d", bad[i], e);
		CHECK(err[0] != 0);
	}
	CHECK_EQ_INT(user_resolve("app:", etc, &u, err, sizeof(err)), -EINVAL);
	CHECK_STR_CONTAINS(err, "expected name, uid, name:group or uid:gid");
	CHECK_EQ_INT(user_resolve("99999999999", etc, &u, err, sizeof(err)), -EINVAL);
	CHECK_STR_CONTAINS(err, "out of range");
}

TEST(agent_user_without_the_files_a_uid_still_runs_and_a_name_says_why)
{
	const char *etc = etc_with(NULL, NULL);
	struct user_ident u;
	char err[256] = "";

	REQUIRE(etc);
	CHECK_OK(user_resolve("1234:5678", etc, &u, err, sizeof(err)), err);
	CHECK(u.uid == 1234 && u.gid == 5678 && !u.named);
	user_ident_free(&u);
	CHECK_EQ_INT(user_resolve("app", etc, &u, err, sizeof(err)), -ENOENT);
	CHECK_STR_CONTAINS(err, "cannot read it");
	/* passwd without group: the user, no supplementary groups */
	etc = etc_with(PASSWD, NULL);
	REQUIRE(etc);
	CHECK_OK(user_resolve("app", etc, &u, err, sizeof(err)), err);
	CHECK(u.uid == 1000 && u.ngroups == 0);
	user_ident_free(&u);
}
