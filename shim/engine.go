// The node's engine, reached over its Unix socket (docs/engine.md, "API"): the few operations the shim needs, and
// the streamed exec WebSocket that carries a container's process.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"

	"golang.org/x/net/websocket"
)

// smolHome is the engine's data dir, found as the engine finds it: SMOL_HOME, else XDG_DATA_HOME/smol-studio,
// else ~/.local/share/smol-studio.
func smolHome() string {
	if home := os.Getenv("SMOL_HOME"); home != "" {
		return home
	}
	if data := os.Getenv("XDG_DATA_HOME"); data != "" {
		return filepath.Join(data, "smol-studio")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "share", "smol-studio")
}

type engine struct {
	socket string
	http   *http.Client
}

func newEngine(home string) *engine {
	socket := filepath.Join(home, "engine.sock")
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}
	return &engine{socket: socket, http: &http.Client{Transport: &http.Transport{DialContext: dial}}}
}

type episodeAnswer struct {
	Episode struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"episode"`
	VM struct {
		ID string `json:"id"`
	} `json:"vm"`
}

// call sends one API request (body as JSON when not nil) and decodes the answer into out when not nil. A refusal
// comes back as the engine's own message.
func (e *engine) call(ctx context.Context, method, path string, body, out interface{}) error {
	var reader io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		reader = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://smol/api/v1"+path, reader)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := e.http.Do(req)
	if err != nil {
		return fmt.Errorf("the engine at %s does not answer (%v): start it on this node (docs/kubernetes.md)", e.socket, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode >= 300 {
		var refusal struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(data, &refusal) == nil && refusal.Error.Message != "" {
			return fmt.Errorf("engine: %s %s: %d %s", method, path, res.StatusCode, refusal.Error.Message)
		}
		return fmt.Errorf("engine: %s %s: %d", method, path, res.StatusCode)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (e *engine) createEpisode(ctx context.Context, smolfile, name string) (episodeAnswer, error) {
	var answer episodeAnswer
	body := map[string]string{"smolfile": smolfile}
	if name != "" {
		body["name"] = name
	}
	err := e.call(ctx, http.MethodPost, "/episodes", body, &answer)
	return answer, err
}

func (e *engine) labelVM(ctx context.Context, vm string, labels map[string]string) error {
	return e.call(ctx, http.MethodPatch, "/vms/"+url.PathEscape(vm), map[string]interface{}{"labels": labels}, nil)
}

func (e *engine) deleteEpisode(ctx context.Context, episode string) error {
	return e.call(ctx, http.MethodDelete, "/episodes/"+url.PathEscape(episode)+"?force=true", nil, nil)
}

func (e *engine) pauseVM(ctx context.Context, vm string) error {
	return e.call(ctx, http.MethodPost, "/vms/"+url.PathEscape(vm)+"/pause", nil, nil)
}

func (e *engine) resumeVM(ctx context.Context, vm string) error {
	return e.call(ctx, http.MethodPost, "/vms/"+url.PathEscape(vm)+"/resume", nil, nil)
}

// execRequest is the API's ExecRequest with the streamed exec's "stdin": true.
type execRequest struct {
	Argv  []string          `json:"argv"`
	Env   map[string]string `json:"env,omitempty"`
	Cwd   string            `json:"cwd,omitempty"`
	User  string            `json:"user,omitempty"`
	Stdin bool              `json:"stdin"`
}

// execMessage is one of the exec WebSocket's text messages from the engine.
type execMessage struct {
	Type     string  `json:"type"`
	ExitCode *int    `json:"exitCode"`
	Signal   *string `json:"signal"`
	TimedOut bool    `json:"timedOut"`
	Message  string  `json:"message"`
}

// openExec opens the exec WebSocket of a VM and sends the request; the command starts when "started" comes.
func (e *engine) openExec(vm string, request execRequest) (*websocket.Conn, error) {
	config, err := websocket.NewConfig("ws://smol/api/v1/vms/"+url.PathEscape(vm)+"/exec", "http://smol/")
	if err != nil {
		return nil, err
	}
	conn, err := net.Dial("unix", e.socket)
	if err != nil {
		return nil, fmt.Errorf("the engine at %s does not answer (%v)", e.socket, err)
	}
	ws, err := websocket.NewClient(config, conn)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("engine: exec in %s: %v", vm, err)
	}
	ws.PayloadType = websocket.TextFrame
	text, err := json.Marshal(request)
	if err == nil {
		err = websocket.Message.Send(ws, string(text))
	}
	if err != nil {
		ws.Close()
		return nil, err
	}
	return ws, nil
}
