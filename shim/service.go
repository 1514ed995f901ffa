// The task service containerd calls: one shim process serves the containers of one pod (or one `ctr run`), each
// an episode of its own on the engine, and a pod's sandbox container a placeholder with nothing to run.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	eventstypes "github.com/containerd/containerd/api/events"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/errdefs"
	"github.com/containerd/containerd/log"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/runtime"
	"github.com/containerd/containerd/runtime/v2/shim"
	taskAPI "github.com/containerd/containerd/runtime/v2/task"
	"github.com/containerd/fifo"
	ptypes "github.com/gogo/protobuf/types"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/net/websocket"
	"golang.org/x/sys/unix"
)

// episodeFile, in a bundle, holds the id of the container's episode, for a cleanup after the shim died.
const episodeFile = "smol-episode"

var _ = (taskAPI.TaskService)(&service{})

type service struct {
	ctx        context.Context
	engine     *engine
	home       string
	address    string // containerd's, for its image store
	events     chan interface{}
	shutdown   func()
	mu         sync.Mutex
	containers map[string]*container
}

// container is one container's state; its mutex guards every field that changes.
type container struct {
	id, bundle            string
	spec                  *specs.Spec
	stdin, stdout, stderr string
	sandbox               bool
	episode, vm, smolfile string

	mu         sync.Mutex
	status     task.Status
	exitStatus uint32
	exitedAt   time.Time
	exited     chan struct{}
	exec       *websocket.Conn
}

func newService(ctx context.Context, id string, publisher shim.Publisher, shutdown func()) (shim.Shim, error) {
	home := smolHome()
	s := &service{
		ctx:        ctx,
		engine:     newEngine(home),
		home:       home,
		events:     make(chan interface{}, 128),
		shutdown:   shutdown,
		containers: map[string]*container{},
	}
	if address := flag.Lookup("address"); address != nil {
		s.address = address.Value.String()
	}
	go s.forward(publisher)
	return s, nil
}

// StartShim starts the shim process that serves the task API, or answers the address of the one already serving
// this container's pod (grouped by the CRI's sandbox id, as runc's shim does).
func (s *service) StartShim(ctx context.Context, opts shim.StartOpts) (_ string, retErr error) {
	ns, err := namespaces.NamespaceRequired(ctx)
	if err != nil {
		return "", err
	}
	grouping := opts.ID
	if spec, err := readSpec("."); err == nil && spec.Annotations[criSandboxID] != "" {
		grouping = spec.Annotations[criSandboxID]
	}
	address, err := shim.SocketAddress(ctx, opts.Address, grouping)
	if err != nil {
		return "", err
	}
	socket, err := shim.NewSocket(address)
	if err != nil {
		if !shim.SocketEaddrinuse(err) {
			return "", fmt.Errorf("create the shim's socket: %w", err)
		}
		if shim.CanConnect(address) {
			return address, shim.WriteAddress("address", address)
		}
		if err := shim.RemoveSocket(address); err != nil {
			return "", err
		}
		if socket, err = shim.NewSocket(address); err != nil {
			return "", fmt.Errorf("create the shim's socket: %w", err)
		}
	}
	defer func() {
		if retErr != nil {
			socket.Close()
			_ = shim.RemoveSocket(address)
		}
	}()
	if err := shim.WriteAddress("address", address); err != nil {
		return "", err
	}
	f, err := socket.File()
	if err != nil {
		return "", err
	}
	defer f.Close()
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	args := []string{"-namespace", ns, "-id", opts.ID, "-address", opts.Address}
	if opts.Debug {
		args = append(args, "-debug")
	}
	cmd := exec.Command(self, args...)
	cmd.Dir, _ = os.Getwd()
	cmd.Env = os.Environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.ExtraFiles = []*os.File{f} // fd 3: the socket the served shim listens on
	if err := cmd.Start(); err != nil {
		return "", err
	}
	go cmd.Wait() //nolint:errcheck // the served shim outlives this process
	return address, nil
}

// Cleanup runs (as `shim delete`, in the bundle) when the serving shim died: the episode goes with its container.
func (s *service) Cleanup(ctx context.Context) (*taskAPI.DeleteResponse, error) {
	if address, err := shim.ReadAddress("address"); err == nil {
		_ = shim.RemoveSocket(address)
	}
	if id, err := os.ReadFile(episodeFile); err == nil && len(id) > 0 {
		if err := s.engine.deleteEpisode(ctx, string(id)); err != nil {
			log.G(ctx).WithError(err).Warn("smol: deleting the episode of a container whose shim died")
		}
	}
	return &taskAPI.DeleteResponse{ExitedAt: time.Now(), ExitStatus: 128 + uint32(unix.SIGKILL)}, nil
}

// Create makes the container's episode: its image exported to the engine, a Smolfile of it, the episode booted.
// The process runs at Start.
func (s *service) Create(ctx context.Context, r *taskAPI.CreateTaskRequest) (*taskAPI.CreateTaskResponse, error) {
	if r.Terminal {
		return nil, errdefs.ToGRPCf(errdefs.ErrNotImplemented, "smol: a container with a terminal (-t) is not supported yet")
	}
	if r.Checkpoint != "" {
		return nil, errdefs.ToGRPCf(errdefs.ErrNotImplemented, "smol: containerd checkpoints are not supported (checkpoint the episode)")
	}
	spec, err := readSpec(r.Bundle)
	if err != nil {
		return nil, err
	}
	c := &container{
		id: r.ID, bundle: r.Bundle, spec: spec, stdin: r.Stdin, stdout: r.Stdout, stderr: r.Stderr,
		sandbox: spec.Annotations[criContainerType] == "sandbox", status: task.StatusCreated, exited: make(chan struct{}),
	}
	if !c.sandbox {
		if err := s.createEpisode(ctx, c); err != nil {
			log.G(ctx).WithError(err).Error("smol: create")
			return nil, err
		}
	}
	s.mu.Lock()
	s.containers[r.ID] = c
	s.mu.Unlock()
	s.events <- &eventstypes.TaskCreate{
		ContainerID: r.ID, Bundle: r.Bundle, Rootfs: r.Rootfs, Pid: uint32(os.Getpid()),
		IO: &eventstypes.TaskIO{Stdin: r.Stdin, Stdout: r.Stdout, Stderr: r.Stderr},
	}
	return &taskAPI.CreateTaskResponse{Pid: uint32(os.Getpid())}, nil
}

func (s *service) createEpisode(ctx context.Context, c *container) error {
	reference, err := exportImage(ctx, s.address, c.id, c.spec, s.home)
	if err != nil {
		return err
	}
	text, err := smolfileOf(c.spec, reference, c.id)
	if err != nil {
		return err
	}
	ns, _ := namespaces.Namespace(ctx)
	c.smolfile = filepath.Join(s.home, "smolfiles", fmt.Sprintf("containerd-%s-%s.smolfile", ns, c.id))
	if err := os.MkdirAll(filepath.Dir(c.smolfile), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(c.smolfile, []byte(text), 0o600); err != nil {
		return err
	}
	answer, err := s.engine.createEpisode(ctx, c.smolfile, c.id)
	if err != nil {
		os.Remove(c.smolfile)
		return err
	}
	c.episode, c.vm = answer.Episode.ID, answer.VM.ID
	if err := os.WriteFile(filepath.Join(c.bundle, episodeFile), []byte(c.episode), 0o600); err != nil {
		log.G(ctx).WithError(err).Warn("smol: the bundle does not keep the episode's id")
	}
	labels := map[string]string{"containerd.namespace": ns, "containerd.id": c.id}
	for key, annotation := range map[string]string{
		"k8s.pod": criSandboxName, "k8s.namespace": criSandboxNs, "k8s.container": criContainerName,
	} {
		if value := c.spec.Annotations[annotation]; value != "" {
			labels[key] = value
		}
	}
	if err := s.engine.labelVM(ctx, c.vm, labels); err != nil {
		log.G(ctx).WithError(err).Warn("smol: labelling the container's VM")
	}
	return nil
}

func (s *service) get(id, execID string) (*container, error) {
	if execID != "" {
		return nil, errdefs.ToGRPCf(errdefs.ErrNotImplemented, "smol: exec processes are not supported yet")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.containers[id]
	if !ok {
		return nil, errdefs.ToGRPCf(errdefs.ErrNotFound, "container %s", id)
	}
	return c, nil
}

// Start runs the container's process in its episode through the guest agent, its stdio on containerd's fifos.
func (s *service) Start(ctx context.Context, r *taskAPI.StartRequest) (*taskAPI.StartResponse, error) {
	c, err := s.get(r.ID, r.ExecID)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status != task.StatusCreated {
		return nil, errdefs.ToGRPCf(errdefs.ErrFailedPrecondition, "container %s is not newly created", c.id)
	}
	pid := uint32(os.Getpid())
	if c.sandbox {
		c.status = task.StatusRunning
		s.events <- &eventstypes.TaskStart{ContainerID: c.id, Pid: pid}
		return &taskAPI.StartResponse{Pid: pid}, nil
	}
	stdout, err := openOutput(ctx, c.stdout)
	if err != nil {
		return nil, err
	}
	stderr, err := openOutput(ctx, c.stderr)
	if err != nil {
		stdout.Close()
		return nil, err
	}
	ws, err := s.engine.openExec(c.vm, execOf(c.spec.Process, c.stdin != ""))
	if err == nil {
		err = awaitStarted(ws)
	}
	if err != nil {
		stdout.Close()
		stderr.Close()
		return nil, err
	}
	c.exec, c.status = ws, task.StatusRunning
	s.events <- &eventstypes.TaskStart{ContainerID: c.id, Pid: pid}
	if c.stdin != "" {
		go feedStdin(c.stdin, ws)
	}
	go s.relay(c, ws, stdout, stderr)
	return &taskAPI.StartResponse{Pid: pid}, nil
}

// frame is one WebSocket message with its kind.
type frame struct {
	binary bool
	data   []byte
}

var frames = websocket.Codec{Unmarshal: func(data []byte, payloadType byte, v interface{}) error {
	*v.(*frame) = frame{binary: payloadType == websocket.BinaryFrame, data: data}
	return nil
}}

func awaitStarted(ws *websocket.Conn) error {
	var f frame
	if err := frames.Receive(ws, &f); err != nil {
		ws.Close()
		return fmt.Errorf("engine: exec: %v", err)
	}
	var message execMessage
	if f.binary || json.Unmarshal(f.data, &message) != nil || message.Type != "started" {
		ws.Close()
		return fmt.Errorf("engine: exec: %s", firstOf(message.Message, string(f.data)))
	}
	return nil
}

// relay copies the process's output to the fifos until its exit comes, then reports the exit.
func (s *service) relay(c *container, ws *websocket.Conn, stdout, stderr io.WriteCloser) {
	status := uint32(255)
	for {
		var f frame
		if err := frames.Receive(ws, &f); err != nil {
			log.G(s.ctx).WithError(err).Warnf("smol: container %s: the exec stream ended without an exit", c.id)
			break
		}
		if f.binary && len(f.data) > 0 {
			out := stdout
			if f.data[0] == 2 {
				out = stderr
			}
			_, _ = out.Write(f.data[1:])
			continue
		}
		var message execMessage
		_ = json.Unmarshal(f.data, &message)
		if message.Type == "exit" {
			status = exitStatusOf(message)
			break
		}
		if message.Type == "error" {
			log.G(s.ctx).Errorf("smol: container %s: %s", c.id, message.Message)
		}
	}
	ws.Close()
	stdout.Close()
	stderr.Close()
	s.exit(c, status)
}

// exitStatusOf is a shell's status for the process's end: its code, or 128 + the signal that ended it.
func exitStatusOf(message execMessage) uint32 {
	if message.Signal != nil {
		if number := unix.SignalNum(*message.Signal); number != 0 {
			return 128 + uint32(number)
		}
		return 255
	}
	if message.ExitCode != nil {
		return uint32(*message.ExitCode)
	}
	return 255
}

func (s *service) exit(c *container, status uint32) {
	c.mu.Lock()
	if c.status == task.StatusStopped {
		c.mu.Unlock()
		return
	}
	c.status, c.exitStatus, c.exitedAt, c.exec = task.StatusStopped, status, time.Now(), nil
	close(c.exited)
	c.mu.Unlock()
	s.events <- &eventstypes.TaskExit{
		ContainerID: c.id, ID: c.id, Pid: uint32(os.Getpid()), ExitStatus: status, ExitedAt: c.exitedAt,
	}
}

func feedStdin(path string, ws *websocket.Conn) {
	in, err := fifo.OpenFifo(context.Background(), path, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	defer in.Close()
	buffer := make([]byte, 32<<10)
	for {
		n, err := in.Read(buffer)
		if n > 0 {
			if websocket.Message.Send(ws, buffer[:n]) != nil {
				return
			}
		}
		if err != nil {
			_ = websocket.Message.Send(ws, `{"type":"eof"}`)
			return
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) Close() error                { return nil }

func openOutput(ctx context.Context, path string) (io.WriteCloser, error) {
	if path == "" {
		return discard{}, nil
	}
	return fifo.OpenFifo(ctx, path, syscall.O_WRONLY, 0)
}

// Kill passes the signal to the container's process (the agent signals its process group); a container not
// started yet, or a sandbox, ends with it at once.
func (s *service) Kill(ctx context.Context, r *taskAPI.KillRequest) (*ptypes.Empty, error) {
	c, err := s.get(r.ID, r.ExecID)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	ws, status := c.exec, c.status
	c.mu.Unlock()
	switch {
	case status == task.StatusStopped:
		return &ptypes.Empty{}, nil
	case ws != nil:
		name := unix.SignalName(syscall.Signal(r.Signal))
		if name == "" {
			return nil, errdefs.ToGRPCf(errdefs.ErrInvalidArgument, "signal %d has no name", r.Signal)
		}
		if err := websocket.Message.Send(ws, fmt.Sprintf(`{"type":"signal","signal":%q}`, name)); err != nil {
			return nil, fmt.Errorf("engine: signal %s to container %s: %v", name, c.id, err)
		}
	default:
		s.exit(c, 128+r.Signal)
	}
	return &ptypes.Empty{}, nil
}

// Delete deletes the container's episode (its VM and snapshots) once its process has ended.
func (s *service) Delete(ctx context.Context, r *taskAPI.DeleteRequest) (*taskAPI.DeleteResponse, error) {
	c, err := s.get(r.ID, r.ExecID)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	running := c.status == task.StatusRunning || c.status == task.StatusPaused
	c.mu.Unlock()
	if running {
		return nil, errdefs.ToGRPCf(errdefs.ErrFailedPrecondition, "container %s is still running: kill it first", c.id)
	}
	if c.episode != "" {
		if err := s.engine.deleteEpisode(ctx, c.episode); err != nil {
			return nil, err
		}
		os.Remove(c.smolfile)
		os.Remove(filepath.Join(c.bundle, episodeFile))
	}
	s.mu.Lock()
	delete(s.containers, c.id)
	s.mu.Unlock()
	pid := uint32(os.Getpid())
	s.events <- &eventstypes.TaskDelete{ContainerID: c.id, Pid: pid, ExitStatus: c.exitStatus, ExitedAt: c.exitedAt}
	return &taskAPI.DeleteResponse{Pid: pid, ExitStatus: c.exitStatus, ExitedAt: c.exitedAt}, nil
}

func (s *service) State(ctx context.Context, r *taskAPI.StateRequest) (*taskAPI.StateResponse, error) {
	c, err := s.get(r.ID, r.ExecID)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return &taskAPI.StateResponse{
		ID: c.id, Bundle: c.bundle, Pid: uint32(os.Getpid()), Status: c.status,
		Stdin: c.stdin, Stdout: c.stdout, Stderr: c.stderr, ExitStatus: c.exitStatus, ExitedAt: c.exitedAt,
	}, nil
}

func (s *service) Wait(ctx context.Context, r *taskAPI.WaitRequest) (*taskAPI.WaitResponse, error) {
	c, err := s.get(r.ID, r.ExecID)
	if err != nil {
		return nil, err
	}
	select {
	case <-c.exited:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return &taskAPI.WaitResponse{ExitStatus: c.exitStatus, ExitedAt: c.exitedAt}, nil
}

// Pause and Resume pause and resume the container's VM: its vCPUs stop, the guest's clocks with them.
func (s *service) Pause(ctx context.Context, r *taskAPI.PauseRequest) (*ptypes.Empty, error) {
	return s.setPaused(ctx, r.ID, true)
}

func (s *service) Resume(ctx context.Context, r *taskAPI.ResumeRequest) (*ptypes.Empty, error) {
	return s.setPaused(ctx, r.ID, false)
}

func (s *service) setPaused(ctx context.Context, id string, paused bool) (*ptypes.Empty, error) {
	c, err := s.get(id, "")
	if err != nil {
		return nil, err
	}
	if c.vm == "" {
		return nil, errdefs.ToGRPCf(errdefs.ErrFailedPrecondition, "container %s has no VM", id)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if paused {
		err, c.status = s.engine.pauseVM(ctx, c.vm), task.StatusPaused
	} else {
		err, c.status = s.engine.resumeVM(ctx, c.vm), task.StatusRunning
	}
	return &ptypes.Empty{}, err
}

func (s *service) Pids(ctx context.Context, r *taskAPI.PidsRequest) (*taskAPI.PidsResponse, error) {
	if _, err := s.get(r.ID, ""); err != nil {
		return nil, err
	}
	return &taskAPI.PidsResponse{Processes: []*task.ProcessInfo{{Pid: uint32(os.Getpid())}}}, nil
}

func (s *service) CloseIO(ctx context.Context, r *taskAPI.CloseIORequest) (*ptypes.Empty, error) {
	c, err := s.get(r.ID, r.ExecID)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	ws := c.exec
	c.mu.Unlock()
	if ws != nil && r.Stdin {
		_ = websocket.Message.Send(ws, `{"type":"eof"}`)
	}
	return &ptypes.Empty{}, nil
}

func (s *service) Connect(ctx context.Context, r *taskAPI.ConnectRequest) (*taskAPI.ConnectResponse, error) {
	pid := uint32(os.Getpid())
	return &taskAPI.ConnectResponse{ShimPid: pid, TaskPid: pid}, nil
}

// Shutdown ends the shim once it serves no container.
func (s *service) Shutdown(ctx context.Context, r *taskAPI.ShutdownRequest) (*ptypes.Empty, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.containers) > 0 {
		return &ptypes.Empty{}, nil
	}
	s.shutdown()
	close(s.events)
	return &ptypes.Empty{}, nil
}

func (s *service) Exec(ctx context.Context, r *taskAPI.ExecProcessRequest) (*ptypes.Empty, error) {
	return nil, errdefs.ToGRPCf(errdefs.ErrNotImplemented, "smol: exec processes are not supported yet")
}

func (s *service) ResizePty(ctx context.Context, r *taskAPI.ResizePtyRequest) (*ptypes.Empty, error) {
	return nil, errdefs.ToGRPCf(errdefs.ErrNotImplemented, "smol: terminals are not supported yet")
}

func (s *service) Checkpoint(ctx context.Context, r *taskAPI.CheckpointTaskRequest) (*ptypes.Empty, error) {
	return nil, errdefs.ToGRPCf(errdefs.ErrNotImplemented, "smol: checkpoint the episode instead (smol checkpoint)")
}

func (s *service) Stats(ctx context.Context, r *taskAPI.StatsRequest) (*taskAPI.StatsResponse, error) {
	return nil, errdefs.ToGRPCf(errdefs.ErrNotImplemented, "smol: the engine's metrics have the VM's figures")
}

func (s *service) Update(ctx context.Context, r *taskAPI.UpdateTaskRequest) (*ptypes.Empty, error) {
	return nil, errdefs.ToGRPCf(errdefs.ErrNotImplemented, "smol: a running VM's resources do not change")
}

// forward publishes the task events in order, and closes the publisher when the shim shuts down.
func (s *service) forward(publisher shim.Publisher) {
	ns, _ := namespaces.Namespace(s.ctx)
	ctx := namespaces.WithNamespace(context.Background(), ns)
	for event := range s.events {
		publishCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := publisher.Publish(publishCtx, topicOf(event), event); err != nil {
			log.G(ctx).WithError(err).Error("smol: publishing an event")
		}
		cancel()
	}
	publisher.Close()
}

func topicOf(event interface{}) string {
	switch event.(type) {
	case *eventstypes.TaskCreate:
		return runtime.TaskCreateEventTopic
	case *eventstypes.TaskStart:
		return runtime.TaskStartEventTopic
	case *eventstypes.TaskExit:
		return runtime.TaskExitEventTopic
	case *eventstypes.TaskDelete:
		return runtime.TaskDeleteEventTopic
	}
	return runtime.TaskUnknownTopic
}

func firstOf(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
