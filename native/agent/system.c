/*
 * The guest side of the agent: bringing the system up as PID 1, the listening socket, identity re-minting after a
 * fork or restore, and powering off. Outside the guest (`--listen unix:` for tests, no --system) nothing here
 * touches the host: no mounts, no hostname, no RNG, and poweroff only ends the agent.
 */
#define _GNU_SOURCE
#include "agent.h"
#include "file_io.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <linux/vm_sockets.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define REMINT_MAX_ENTROPY 512

static int mount_one(const char *source, const char *target, const char *type, unsigned long flags,
		     const char *data)
{
	mkdir(target, 0755);
	if (mount(source, target, type, flags, data) == 0 || errno == EBUSY)
		return 0;
	agent_log("mount %s on %s: %s", type, target, strerror(errno));
	return -errno;
}

static void loopback_up(void)
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return;
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP;
		if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
			agent_log("bringing lo up: %s", strerror(errno));
	}
	close(fd);
}

int system_bring_up(void)
{
	const unsigned long nosuid = MS_NOSUID, common = MS_NOSUID | MS_NODEV | MS_NOEXEC;
	char name[65] = "";
	int e = 0;

	e |= mount_one("proc", "/proc", "proc", common, NULL);
	e |= mount_one("sysfs", "/sys", "sysfs", common, NULL);
	e |= mount_one("devtmpfs", "/dev", "devtmpfs", nosuid, "mode=0755");
	e |= mount_one("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "gid=5,mode=0620,ptmxmode=0666");
	e |= mount_one("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
	e |= mount_one("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	if (!getenv("PATH"))
		setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 1);
	if (gethostname(name, sizeof(name) - 1) == 0 && (!name[0] || !strcmp(name, "(none)")))
		if (sethostname("smol", 4) < 0)
			agent_log("sethostname: %s", strerror(errno));
	loopback_up();
	return e ? -1 : 0;
}

void system_read_boot_id(struct agent *a)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	snprintf(a->boot_id, sizeof(a->boot_id), "unknown");
	if (f) {
		if (fgets(a->boot_id, sizeof(a->boot_id), f))
			a->boot_id[strcspn(a->boot_id, "\n")] = 0;
		fclose(f);
	}
}

/* Writes a whole small file through a temporary name and a rename. Returns 0 or -errno. */
static int write_file_atomic(const char *path, const char *text)
{
	char tmp[4096];
	size_t len = strlen(text);
	int fd, e = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.smol-tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
	if (fd < 0)
		return -errno;
	e = file_write_all(fd, text, len);
	if (close(fd) < 0 && !e)
		e = -errno;
	if (!e && rename(tmp, path) < 0)
		e = -errno;
	if (e)
		unlink(tmp);
	return e;
}

static int valid_hostname(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > 64 || s[0] == '-' || s[0] == '.')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
		      s[i] == '-' || s[i] == '.'))
			return 0;
	return 1;
}

static int valid_machine_id(const char *s)
{
	if (strlen(s) != 32)
		return 0;
	for (int i = 0; i < 32; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

static int add_entropy(const uint8_t *bytes, size_t len)
{
	struct {
		struct rand_pool_info info;
		uint8_t buf[REMINT_MAX_ENTROPY];
	} pool;
	int fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC), e = 0;

	if (fd < 0)
		return -errno;
	pool.info.entropy_count = (int)len * 8;
	pool.info.buf_size = (int)len;
	memcpy(pool.buf, bytes, len);
	if (ioctl(fd, RNDADDENTROPY, &pool) < 0)
		e = -errno;
	close(fd);
	return e;
}

void system_remint(struct agent *a, uint32_t id, const uint8_t *payload, size_t len)
{
	struct proto_reader r;
	struct proto_field f;
	struct proto_buf *b = &a->conn.out;
	char *hostname = NULL, *machine_id = NULL, text[128];
	const uint8_t *entropy = NULL;
	uint32_t entropy_len = 0;
	uint64_t generation = a->generation + 1;
	int got, e = 0;
	size_t start;

	proto_reader_init(&r, payload, len);
	while (e == 0 && (got = proto_field_next(&r, &f)) != 0) {
		if (got < 0)
			e = -EBADMSG;
		else if (f.tag == F_HOSTNAME && !hostname)
			e = proto_field_str(&f, &hostname);
		else if (f.tag == F_MACHINE_ID && !machine_id)
			e = proto_field_str(&f, &machine_id);
		else if (f.tag == F_GENERATION)
			e = proto_field_u64(&f, &generation);
		else if (f.tag == F_ENTROPY) {
			entropy = f.val;
			entropy_len = f.len;
		}
	}
	if (e < 0) {
		conn_reply_error(a, id, -e, NULL, "REMINT: malformed request");
		goto out;
	}
	if (hostname && !valid_hostname(hostname)) {
		conn_reply_error(a, id, EINVAL, NULL, "REMINT: hostname '%.80s' is not 1 to 64 letters, digits, '-' or '.'",
				 hostname);
		goto out;
	}
	if (machine_id && !valid_machine_id(machine_id)) {
		conn_reply_error(a, id, EINVAL, NULL, "REMINT: machine-id '%.80s' is not 32 lowercase hex digits",
				 machine_id);
		goto out;
	}
	if (entropy_len > REMINT_MAX_ENTROPY) {
		conn_reply_error(a, id, EINVAL, NULL, "REMINT: %u bytes of entropy; at most %d", entropy_len,
				 REMINT_MAX_ENTROPY);
		goto out;
	}
	/* Validated: apply, and say what was applied and what was left alone. */
	start = proto_frame_begin(b, PT_OK, 0, id);
	if (hostname) {
		if (!a->opt.system)
			proto_put_str(b, F_SKIPPED, "hostname: not the guest's init (needs --system)");
		else if (sethostname(hostname, strlen(hostname)) < 0)
			e = -errno;
		else
			proto_put_str(b, F_APPLIED, "hostname");
		snprintf(text, sizeof(text), "%s\n", hostname);
		if (!e && a->opt.hostname_file && (e = write_file_atomic(a->opt.hostname_file, text)) == 0)
			proto_put_str(b, F_APPLIED, "hostname-file");
		if (e) {
			b->len = start;
			conn_reply_error(a, id, -e, a->opt.hostname_file, "REMINT: setting the hostname: %s", strerror(-e));
			goto out;
		}
	}
	if (machine_id) {
		snprintf(text, sizeof(text), "%s\n", machine_id);
		e = write_file_atomic(a->opt.machine_id_file, text);
		if (e) {
			b->len = start;
			conn_reply_error(a, id, -e, a->opt.machine_id_file, "REMINT: writing %s: %s",
					 a->opt.machine_id_file, strerror(-e));
			goto out;
		}
		proto_put_str(b, F_APPLIED, "machine-id");
	}
	if (entropy_len) {
		if (!a->opt.system) {
			proto_put_str(b, F_SKIPPED, "entropy: not the guest's init (needs --system)");
		} else if ((e = add_entropy(entropy, entropy_len)) < 0) {
			b->len = start;
			conn_reply_error(a, id, -e, "/dev/urandom", "REMINT: RNDADDENTROPY: %s", strerror(-e));
			goto out;
		} else {
			proto_put_str(b, F_APPLIED, "entropy");
		}
	}
	a->generation = generation;
	proto_put_u64(b, F_GENERATION, generation);
	proto_frame_end(b, start);
	agent_log("reminted: generation %llu", (unsigned long long)generation);
out:
	free(hostname);
	free(machine_id);
}

void system_power(struct agent *a, int reboot_cmd)
{
	const char *what = reboot_cmd == 2 ? "reboot" : "poweroff";

	for (int i = 0; i < PROTO_MAX_STREAMS; i++)
		if (a->conn.streams[i] && a->conn.streams[i]->kind == STREAM_EXEC)
			proc_abort(&a->conn.streams[i]->proc);
	if (a->init.state == INIT_RUNNING)
		proc_abort(&a->init.proc);
	if (!a->opt.system) {
		agent_log("%s requested: the agent exits (not the guest's init, so the machine stays up)", what);
		if (!strncmp(a->opt.listen, "unix:", 5))
			unlink(a->opt.listen + 5);
		exit(0);
	}
	agent_log("%s: stopping every process", what);
	kill(-1, SIGTERM);
	for (int i = 0; i < 20 && waitpid(-1, NULL, WNOHANG) >= 0; i++)
		usleep(50 * 1000);
	kill(-1, SIGKILL);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	sync();
	reboot(reboot_cmd == 2 ? RB_AUTOBOOT : RB_POWER_OFF);
	agent_log("reboot(2): %s", strerror(errno));
	for (;;)
		pause();
}

int listen_parse_and_open(const char *spec, int *out, char *err, size_t errlen)
{
	int fd = -1;

	if (!strncmp(spec, "vsock:", 6)) {
		char *end;
		unsigned long port = strtoul(spec + 6, &end, 10);
		struct sockaddr_vm addr = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY };

		if (!spec[6] || *end || port > 0xffffffffUL) {
			snprintf(err, errlen, "--listen %s: the vsock port is not a number", spec);
			return -EINVAL;
		}
		addr.svm_port = (unsigned)port;
		fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(fd, 16) < 0)
			goto fail;
	} else if (!strncmp(spec, "unix:", 5)) {
		struct sockaddr_un addr = { .sun_family = AF_UNIX };
		struct stat st;

		if (!spec[5] || strlen(spec + 5) >= sizeof(addr.sun_path)) {
			snprintf(err, errlen, "--listen %s: the socket path is empty or longer than %zu bytes", spec,
				 sizeof(addr.sun_path) - 1);
			return -EINVAL;
		}
		strcpy(addr.sun_path, spec + 5);
		if (lstat(addr.sun_path, &st) == 0 && S_ISSOCK(st.st_mode))
			unlink(addr.sun_path);	/* left by an agent that was killed */
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(fd, 16) < 0)
			goto fail;
	} else {
		snprintf(err, errlen, "--listen %s: expected vsock:PORT or unix:PATH", spec);
		return -EINVAL;
	}
	*out = fd;
	return 0;
fail:
	snprintf(err, errlen, "--listen %s: %s", spec, strerror(errno));
	if (fd >= 0)
		close(fd);
	return -errno;
}
