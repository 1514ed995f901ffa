// containerd-shim-smol-v2: containerd's runtime v2 shim for Smol Studio (docs/kubernetes.md). Each container that
// containerd (ctr, or Kubernetes through a RuntimeClass) starts with runtime io.containerd.smol.v2 becomes an
// episode on this node's engine: its image becomes the episode's root disk, its process spec one command run by the
// guest agent with the container's stdio, exit status and signals; deleting the container deletes the episode.
package main

import "github.com/containerd/containerd/runtime/v2/shim"

func main() {
	shim.Run("io.containerd.smol.v2", newService)
}
