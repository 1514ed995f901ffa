/*
 * smol-agent: the guest agent (docs/agent.md). One process, one thread, one poll() loop: a listening socket, at most
 * one host connection, a signalfd for SIGCHLD (and, as PID 1, the power signals), and the pipes of the processes it
 * runs. Every request is a stream on the connection, named by the id the host chose.
 */
#ifndef SMOL_AGENT_H
#define SMOL_AGENT_H

#include "proto.h"

#include <stdint.h>
#include <sys/types.h>

#define AGENT_VERSION "0.3.0"
#define AGENT_DEFAULT_PORT 52
#define AGENT_OUT_HIGH (1u << 20)	/* stop producing data while this much is queued for the host */
#define AGENT_IN_STOP (4u << 20)	/* stop reading requests while this much is queued (the host is not reading) */
#define AGENT_EXIT_GRACE_MS 1000	/* after a process exits, how long its pipes may stay open without output */
#define AGENT_INIT_OUTPUT_MAX (1u << 20) /* an init command's output kept for the report */

/* A process the agent started: for an EXEC stream, or one of the init commands. */
struct proc {
	pid_t pid;		/* also its process group: each process starts a session of its own */
	int in_fd, out_fd, err_fd;	/* our ends, -1 once closed; init commands have err_fd -1 (2>&1) */
	struct proto_buf in_pending;	/* stdin bytes received but not yet written to the pipe */
	int in_eof;		/* the host ended stdin: close in_fd once in_pending is written */
	int exited, status;	/* waitpid's status once exited */
	int timed_out;
	int tty;		/* on a pseudo-terminal: out_fd is its master, in_fd a dup of it, err_fd -1 */
	int64_t deadline_ms;	/* when to SIGKILL it, 0 = no timeout */
	int64_t quiet_since_ms;	/* the later of its exit and its last output */
	struct proto_buf *capture;	/* init commands: output collected here instead of streamed */
};

enum stream_kind { STREAM_EXEC, STREAM_READ, STREAM_WRITE };

struct stream {
	uint32_t id;
	enum stream_kind kind;
	uint64_t send_window;	/* data bytes we may still send on this id */
	uint64_t recv_window;	/* data bytes the host may still send */
	struct proc proc;	/* STREAM_EXEC */
	int fd;			/* STREAM_READ, STREAM_WRITE: the file */
	char *path, *tmp_path;	/* STREAM_WRITE: the target and the temporary file renamed over it */
	unsigned mode;
	uint64_t bytes;
};

struct conn {
	int fd;			/* -1: no host connected */
	struct proto_parser in;
	struct proto_buf out;
	struct stream *streams[PROTO_MAX_STREAMS];
};

/* The Smolfile's `init` commands: run once, one after another, stopping at the first failure. */
struct init_job {
	enum init_state state;
	char **cmds;
	int ncmds, next;
	uint64_t timeout_ms;	/* per command, 0 = none */
	struct proc proc;	/* the running command, when state is INIT_RUNNING */
	struct proto_buf output;	/* the running command's output */
	struct proto_buf report;	/* TLV fields: per command F_COMMAND, F_EXIT_CODE or F_SIGNAL, F_OUTPUT */
	uint32_t reply_id;	/* the INIT request to answer when done; 0 = none (its connection dropped) */
};

struct agent_options {
	const char *listen;	/* "vsock:PORT" or "unix:PATH" */
	int system;		/* PID 1 duties: mounts, reaping, reboot(2), hostname and RNG */
	const char *machine_id_file;
	const char *hostname_file;
	const char *etc_dir;	/* where EXEC's USER is looked up: passwd and group */
};

struct agent {
	struct agent_options opt;
	int listen_fd, sig_fd;
	struct conn conn;
	struct init_job init;
	uint64_t generation;	/* bumped by every remint */
	char boot_id[64];
	int power_request;	/* 0, or the reboot(2) command to run once replies are flushed */
};

int64_t agent_now_ms(void);
void agent_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* main.c: replies on the connection (no-ops when no host is connected). */
void conn_reply_error(struct agent *a, uint32_t id, int err, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
struct stream *conn_stream_new(struct agent *a, uint32_t id, enum stream_kind kind);
void conn_stream_close(struct agent *a, struct stream *s);

/* exec.c */
void exec_start(struct agent *a, uint32_t id, const uint8_t *payload, size_t len);
void exec_kill(struct agent *a, struct stream *s, const uint8_t *payload, size_t len);
void exec_stdin(struct agent *a, struct stream *s, const uint8_t *data, size_t len, int eof);
void exec_resize(struct agent *a, struct stream *s, const uint8_t *payload, size_t len);
/* Reads what a process's pipes have (fd is one of its ends); returns 0 or -errno. */
void proc_read(struct agent *a, struct stream *s, struct proc *p, int fd);
void proc_write_stdin(struct agent *a, struct stream *s);
/* A child ended: records it against its stream or the init job. Unknown pids (orphans PID 1 inherits) are fine. */
void proc_reaped(struct agent *a, pid_t pid, int status);
/* Timeouts and finished processes; returns the poll timeout in ms until the next deadline, or -1. */
int proc_tick(struct agent *a);
void proc_abort(struct proc *p);
void init_request(struct agent *a, uint32_t id, const uint8_t *payload, size_t len);

/* files.c */
void file_read_start(struct agent *a, uint32_t id, const uint8_t *payload, size_t len);
void file_write_start(struct agent *a, uint32_t id, const uint8_t *payload, size_t len);
void file_write_data(struct agent *a, struct stream *s, const uint8_t *data, size_t len, int eof);
/* Sends file data while windows allow; returns 1 if it queued anything. */
int file_pump(struct agent *a);
void file_abort(struct stream *s);

/* system.c */
int system_bring_up(void);
void system_remint(struct agent *a, uint32_t id, const uint8_t *payload, size_t len);
void system_read_boot_id(struct agent *a);
/* Ends the guest (system mode) or the agent (host mode); does not return. */
void system_power(struct agent *a, int reboot_cmd) __attribute__((noreturn));
int listen_parse_and_open(const char *spec, int *fd, char *err, size_t errlen);

#endif
