/*
 * The host ↔ agent wire protocol (docs/agent.md): frames with a 12-byte header on one stream connection, TLV
 * fields inside control frames, raw bytes inside data frames. Pure functions, no I/O: the parser and the encoders
 * are what the C unit tests and the fuzz-like hostile-frame tests exercise.
 */
#ifndef SMOL_AGENT_PROTO_H
#define SMOL_AGENT_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_VERSION 1
#define PROTO_HEADER_SIZE 12
#define PROTO_MAX_PAYLOAD (1u << 20)	/* a frame's payload may not exceed 1 MiB */
#define PROTO_DATA_CHUNK (64u << 10)	/* data frames the agent sends carry at most this much */
#define PROTO_WINDOW (256u << 10)	/* initial flow-control window, per stream and direction */
#define PROTO_MAX_STREAMS 64		/* open request ids per connection */
#define PROTO_TTY_MAX 1000		/* a terminal's rows and columns are at most this */

#define PROTO_FLAG_EOF 0x1		/* data frame: the last one of its stream */

enum proto_type {
	/* connection */
	PT_HELLO = 0x01,	/* agent → host, id 0, first frame of every connection */
	PT_OK = 0x02,		/* agent → host: a request succeeded (fields depend on the request) */
	PT_ERROR = 0x03,	/* agent → host: a request (or, with id 0, the connection) failed */
	PT_WINDOW = 0x04,	/* both ways: the sender may send FIELD_WINDOW more data bytes on this id */
	/* exec */
	PT_EXEC = 0x10,		/* host → agent: start a process */
	PT_STDIN = 0x11,	/* host → agent, data */
	PT_KILL = 0x12,		/* host → agent: send FIELD_SIGNAL to the process group */
	PT_STARTED = 0x13,	/* agent → host: FIELD_PID */
	PT_STDOUT = 0x14,	/* agent → host, data */
	PT_STDERR = 0x15,	/* agent → host, data */
	PT_EXIT = 0x16,		/* agent → host: FIELD_EXIT_CODE or FIELD_SIGNAL, FIELD_TIMED_OUT; ends the id */
	PT_RESIZE = 0x17,	/* host → agent: FIELD_ROWS, FIELD_COLS of an EXEC's terminal (TIOCSWINSZ) */
	/* files */
	PT_FILE_READ = 0x20,	/* host → agent: FIELD_PATH; OK (size, mode) then FILE_DATA … EOF */
	PT_FILE_WRITE = 0x21,	/* host → agent: FIELD_PATH, FIELD_MODE, FIELD_MKDIRS; OK, FILE_DATA … EOF, OK */
	PT_FILE_DATA = 0x22,	/* both ways, data */
	/* guest */
	PT_INIT = 0x30,		/* host → agent: FIELD_COMMAND…; runs them once, answers with the report */
	PT_REMINT = 0x40,	/* host → agent: FIELD_HOSTNAME, FIELD_MACHINE_ID, FIELD_ENTROPY, FIELD_GENERATION */
	PT_POWEROFF = 0x50,	/* host → agent: FIELD_REBOOT; OK, then the guest goes down */
};

enum proto_field_tag {
	F_PROTOCOL = 1,		/* u64 */
	F_VERSION = 2,		/* str: the agent's version */
	F_BOOT_ID = 3,		/* str */
	F_GENERATION = 4,	/* u64: bumped by every remint */
	F_INIT_STATE = 5,	/* u64: enum init_state */
	F_WINDOW = 6,		/* u64 */
	F_MAX_PAYLOAD = 7,	/* u64 */
	F_FEATURE = 8,		/* str, repeated: what this agent does that older ones ignore ("exec-user") */
	F_ARGV = 10,		/* str, repeated, in order */
	F_ENV = 11,		/* str "KEY=VALUE", repeated */
	F_CWD = 12,		/* str */
	F_TIMEOUT_MS = 13,	/* u64, 0 = none */
	F_STDIN = 14,		/* u64: 1 = the host streams stdin, 0 = /dev/null */
	F_PID = 15,		/* u64 */
	F_EXIT_CODE = 16,	/* u64 */
	F_SIGNAL = 17,		/* u64 */
	F_TIMED_OUT = 18,	/* u64 0/1 */
	F_USER = 19,		/* str: EXEC as "name", "uid", "name:group", "uid:gid" (OCI's forms); agents without
				 * the "exec-user" feature ignore it */
	F_PATH = 20,		/* str */
	F_MODE = 21,		/* u64: permission bits */
	F_MKDIRS = 22,		/* u64 0/1 */
	F_SIZE = 23,		/* u64 */
	F_TTY = 24,		/* u64 0/1: EXEC on a pseudo-terminal (stdin, stdout and stderr are its slave) */
	F_ROWS = 25,		/* u64: EXEC's and RESIZE's terminal height, 1 to PROTO_TTY_MAX */
	F_COLS = 26,		/* u64: its width, 1 to PROTO_TTY_MAX */
	F_ERRNO = 30,		/* u64: Linux errno */
	F_ERRNAME = 31,		/* str: "ENOENT" */
	F_MESSAGE = 32,		/* str: a sentence naming what failed */
	F_COMMAND = 40,		/* str, repeated: an init command; in a report it starts one command's entry */
	F_OUTPUT = 41,		/* bytes: a command's stdout and stderr, interleaved */
	F_ALREADY_RAN = 42,	/* u64 0/1: the report is of an earlier run */
	F_HOSTNAME = 50,	/* str */
	F_MACHINE_ID = 51,	/* str: 32 lowercase hex digits */
	F_ENTROPY = 52,		/* bytes */
	F_REBOOT = 53,		/* u64 0/1 */
	F_APPLIED = 54,		/* str, repeated: what a remint changed */
	F_SKIPPED = 55,		/* str, repeated: what it left alone, and why */
};

enum init_state { INIT_NOT_RUN = 0, INIT_RUNNING = 1, INIT_DONE = 2, INIT_FAILED = 3 };

struct proto_header {
	uint32_t len;		/* payload bytes after the header */
	uint16_t type;
	uint16_t flags;
	uint32_t id;		/* the request (stream) id; 0 = the connection */
};

/* Decodes a header from PROTO_HEADER_SIZE bytes. Returns 0, or -EMSGSIZE when len exceeds PROTO_MAX_PAYLOAD. */
int proto_header_decode(const uint8_t *buf, struct proto_header *h);
void proto_header_encode(uint8_t *buf, const struct proto_header *h);

/* True for types whose payload is raw bytes rather than TLV fields. */
int proto_type_is_data(uint16_t type);
/* "EXEC", "FILE_READ", …; NULL for an unknown type. */
const char *proto_type_name(uint16_t type);

/*
 * TLV fields: u16 tag, u32 length, then the value. Integers are u64 little-endian (length 8).
 * A reader walks a payload; proto_field_next returns 1 with the next field, 0 at the end, or -EBADMSG when a field
 * overruns the payload (the reader then stays at the end).
 */
struct proto_field {
	uint16_t tag;
	uint32_t len;
	const uint8_t *val;
};

struct proto_reader {
	const uint8_t *p;
	size_t left;
};

void proto_reader_init(struct proto_reader *r, const uint8_t *payload, size_t len);
int proto_field_next(struct proto_reader *r, struct proto_field *f);
/* The field's value as a u64: -EBADMSG unless it is 8 bytes. */
int proto_field_u64(const struct proto_field *f, uint64_t *out);
/*
 * Copies a string field into a new NUL-terminated buffer (malloc). -EBADMSG when it contains a NUL byte (argv,
 * paths and environment entries cannot), -ENOMEM.
 */
int proto_field_str(const struct proto_field *f, char **out);

/* A growable output buffer frames are built in. Allocation failure is sticky: check `failed` once at the end. */
struct proto_buf {
	uint8_t *data;
	size_t len, cap;
	int failed;
};

void proto_buf_free(struct proto_buf *b);
/* Reserves `len` bytes at the end and returns them (NULL on allocation failure). */
uint8_t *proto_buf_grow(struct proto_buf *b, size_t len);
/* Drops the first `n` bytes (sent ones). */
void proto_buf_consume(struct proto_buf *b, size_t n);

/*
 * Frame building: proto_frame_begin writes a header with a placeholder length and returns its offset;
 * proto_put_* append fields; proto_frame_end fills in the length.
 */
size_t proto_frame_begin(struct proto_buf *b, uint16_t type, uint16_t flags, uint32_t id);
void proto_put_u64(struct proto_buf *b, uint16_t tag, uint64_t v);
void proto_put_bytes(struct proto_buf *b, uint16_t tag, const void *v, size_t len);
void proto_put_str(struct proto_buf *b, uint16_t tag, const char *s);
void proto_frame_end(struct proto_buf *b, size_t start);
/* A whole data frame. */
void proto_put_data_frame(struct proto_buf *b, uint16_t type, uint16_t flags, uint32_t id, const void *data,
			  size_t len);

/*
 * Incremental frame parser over a receive buffer: feed it bytes as they arrive and take complete frames out.
 * proto_parser_next returns 1 with a frame (payload points into the parser's buffer, valid until the next call),
 * 0 when more bytes are needed, or -EMSGSIZE for a header whose length exceeds PROTO_MAX_PAYLOAD (the stream
 * cannot be resynchronised: close the connection).
 */
struct proto_parser {
	uint8_t *buf;
	size_t len, cap, off;
};

int proto_parser_init(struct proto_parser *p);
void proto_parser_free(struct proto_parser *p);
void proto_parser_reset(struct proto_parser *p);
/* Space for the next read(): at least 1 byte unless a whole maximal frame is already buffered. */
uint8_t *proto_parser_space(struct proto_parser *p, size_t *avail);
void proto_parser_commit(struct proto_parser *p, size_t n);
int proto_parser_next(struct proto_parser *p, struct proto_header *h, const uint8_t **payload);
/* Bytes received that are not yet a whole frame (nonzero at a disconnect: the last frame was truncated). */
size_t proto_parser_pending(const struct proto_parser *p);

/* "ENOENT", "EACCES", …; "E<number>" for others (in a static buffer). */
const char *proto_errname(int err);

#endif
