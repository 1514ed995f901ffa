// A container's OCI bundle and image, as an episode sees them: the image copied out of containerd's content store
// into an OCI layout the engine reads (by its manifest digest, so a second container of the image converts
// nothing), and a Smolfile of that image with the bundle's resources and directory bind mounts.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/content"
	"github.com/containerd/containerd/images"
	"github.com/containerd/containerd/platforms"
	imagespecs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// layoutTag names the image in the layouts the shim writes: oci:DIR:image.
const layoutTag = "image"

var indexVersion = imagespecs.Versioned{SchemaVersion: 2}

// The CRI plugin's annotations (Kubernetes containers): whether this is the pod's sandbox, and the pod's names.
const (
	criContainerType = "io.kubernetes.cri.container-type"
	criSandboxName   = "io.kubernetes.cri.sandbox-name"
	criSandboxNs     = "io.kubernetes.cri.sandbox-namespace"
	criContainerName = "io.kubernetes.cri.container-name"
	criSandboxID     = "io.kubernetes.cri.sandbox-id"
	criImageName     = "io.kubernetes.cri.image-name"
)

func readSpec(bundle string) (*specs.Spec, error) {
	data, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		return nil, err
	}
	var spec specs.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		return nil, fmt.Errorf("%s: %v", filepath.Join(bundle, "config.json"), err)
	}
	if spec.Process == nil || len(spec.Process.Args) == 0 {
		return nil, fmt.Errorf("%s: the process has no args", filepath.Join(bundle, "config.json"))
	}
	return &spec, nil
}

// exportImage writes the container's image (containerd's record of it, else the CRI's annotation) (linux/amd64 where it is an index) from containerd's content store
// into HOME/containerd/images/<manifest hex>/ as an OCI layout, unless an earlier container wrote it; it answers
// the engine's reference to it.
func exportImage(ctx context.Context, address, id string, spec *specs.Spec, home string) (string, error) {
	client, err := containerd.New(address)
	if err != nil {
		return "", fmt.Errorf("containerd at %s: %v", address, err)
	}
	defer client.Close()
	container, err := client.ContainerService().Get(ctx, id)
	if err != nil {
		return "", fmt.Errorf("container %s: %v", id, err)
	}
	if container.Image == "" {
		container.Image = spec.Annotations[criImageName] // Kubernetes names it here
	}
	if container.Image == "" {
		return "", fmt.Errorf("container %s has no image: the smol runtime runs a container's image, not its rootfs", id)
	}
	image, err := client.ImageService().Get(ctx, container.Image)
	if err != nil {
		return "", fmt.Errorf("container %s: image %s: %v", id, container.Image, err)
	}
	store := client.ContentStore()
	manifest, err := platformManifest(ctx, store, image.Target)
	if err != nil {
		return "", fmt.Errorf("image %s: %v", container.Image, err)
	}
	dir := filepath.Join(home, "containerd", "images", manifest.Digest.Encoded())
	reference := "oci:" + dir + ":" + layoutTag
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err == nil {
		return reference, nil
	}
	var parsed ocispec.Manifest
	data, err := content.ReadBlob(ctx, store, manifest)
	if err == nil {
		err = json.Unmarshal(data, &parsed)
	}
	if err != nil {
		return "", fmt.Errorf("image %s: its manifest: %v", container.Image, err)
	}
	partial, err := os.MkdirTemp(filepath.Dir(dir), ".partial-")
	if err != nil {
		if err = os.MkdirAll(filepath.Dir(dir), 0o700); err == nil {
			partial, err = os.MkdirTemp(filepath.Dir(dir), ".partial-")
		}
		if err != nil {
			return "", err
		}
	}
	defer os.RemoveAll(partial)
	for _, blob := range append([]ocispec.Descriptor{manifest, parsed.Config}, parsed.Layers...) {
		if err := copyBlob(ctx, store, blob, partial); err != nil {
			return "", fmt.Errorf("image %s: blob %s: %v", container.Image, blob.Digest, err)
		}
	}
	manifest.Annotations = map[string]string{ocispec.AnnotationRefName: layoutTag}
	manifest.Platform = nil
	index, _ := json.Marshal(ocispec.Index{Versioned: indexVersion, Manifests: []ocispec.Descriptor{manifest}})
	layout, _ := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	if err := os.WriteFile(filepath.Join(partial, ocispec.ImageLayoutFile), layout, 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(partial, "index.json"), index, 0o644); err != nil {
		return "", err
	}
	// Another container of the same image may have published it meanwhile: theirs is as good.
	if err := os.Rename(partial, dir); err != nil && !os.IsExist(err) {
		if _, statErr := os.Stat(filepath.Join(dir, "index.json")); statErr != nil {
			return "", err
		}
	}
	return reference, nil
}

// platformManifest is the image's manifest for this platform: the target itself, or its pick from an index.
func platformManifest(ctx context.Context, store content.Store, target ocispec.Descriptor) (ocispec.Descriptor, error) {
	if !images.IsIndexType(target.MediaType) {
		return target, nil
	}
	data, err := content.ReadBlob(ctx, store, target)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	var index ocispec.Index
	if err := json.Unmarshal(data, &index); err != nil {
		return ocispec.Descriptor{}, err
	}
	match := platforms.Default()
	for _, m := range index.Manifests {
		if m.Platform == nil || match.Match(*m.Platform) {
			return platformManifest(ctx, store, m)
		}
	}
	return ocispec.Descriptor{}, fmt.Errorf("no manifest for %s in its index", platforms.DefaultString())
}

func copyBlob(ctx context.Context, store content.Store, blob ocispec.Descriptor, layout string) error {
	dir := filepath.Join(layout, "blobs", blob.Digest.Algorithm().String())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	reader, err := store.ReaderAt(ctx, blob)
	if err != nil {
		return err
	}
	defer reader.Close()
	file, err := os.Create(filepath.Join(dir, blob.Digest.Encoded()))
	if err != nil {
		return err
	}
	_, err = io.Copy(file, content.NewReader(reader))
	if closeErr := file.Close(); err == nil {
		err = closeErr
	}
	return err
}

// smolfileOf is the Smolfile of a container's episode: its image, vCPUs from its CPU quota (or cpuset), memory
// from its limit, and its bind mounts of directories as volumes. What else the spec says (namespaces, cgroups,
// capabilities, seccomp, the rootfs) belongs to a container runtime; the VM is the container's boundary here.
func smolfileOf(spec *specs.Spec, reference, id string) (string, error) {
	lines := []string{
		fmt.Sprintf("# Written by containerd-shim-smol-v2 for container %s.", id),
		"image = " + strconv.Quote(reference),
	}
	if resources := linuxResources(spec); resources != nil {
		if cpu := resources.CPU; cpu != nil && cpu.Quota != nil && *cpu.Quota > 0 && cpu.Period != nil && *cpu.Period > 0 {
			cpus := int(math.Ceil(float64(*cpu.Quota) / float64(*cpu.Period)))
			lines = append(lines, fmt.Sprintf("cpus = %d", clamp(cpus, 1, 64)))
		}
		if memory := resources.Memory; memory != nil && memory.Limit != nil && *memory.Limit > 0 {
			mib := int(*memory.Limit >> 20)
			lines = append(lines, fmt.Sprintf("memory = %d", clamp(mib, 2, 262144)))
		}
	}
	var volumes []string
	for _, m := range spec.Mounts {
		if m.Type != "bind" && !hasOption(m.Options, "bind") && !hasOption(m.Options, "rbind") {
			continue
		}
		if info, err := os.Stat(m.Source); err != nil || !info.IsDir() {
			continue // a file (resolv.conf, hosts, termination-log): the guest has its own
		}
		volume := m.Source + ":" + m.Destination
		if hasOption(m.Options, "ro") {
			volume += ":ro"
		}
		volumes = append(volumes, strconv.Quote(volume))
	}
	if len(volumes) > 4 {
		return "", fmt.Errorf("container %s has %d directory mounts; an episode takes at most 4 volumes", id, len(volumes))
	}
	if len(volumes) > 0 {
		lines = append(lines, "volumes = ["+strings.Join(volumes, ", ")+"]")
	}
	return strings.Join(lines, "\n") + "\n", nil
}

func linuxResources(spec *specs.Spec) *specs.LinuxResources {
	if spec.Linux == nil {
		return nil
	}
	return spec.Linux.Resources
}

// execOf is the exec request of a container's process: its args, env, cwd and uid:gid exactly as the bundle says
// (containerd already merged the image's config with what the user asked for).
func execOf(process *specs.Process, stdin bool) execRequest {
	env := map[string]string{}
	for _, pair := range process.Env {
		if name, value, ok := strings.Cut(pair, "="); ok && name != "" {
			env[name] = value
		}
	}
	return execRequest{
		Argv:  process.Args,
		Env:   env,
		Cwd:   process.Cwd,
		User:  fmt.Sprintf("%d:%d", process.User.UID, process.User.GID),
		Stdin: stdin,
	}
}

func hasOption(options []string, want string) bool {
	for _, o := range options {
		if o == want {
			return true
		}
	}
	return false
}

func clamp(n, low, high int) int {
	if n < low {
		return low
	}
	if n > high {
		return high
	}
	return n
}
