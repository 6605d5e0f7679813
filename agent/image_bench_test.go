package agent

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/skein-dev/skein/agent/engine"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// BenchmarkSubmitToRunningImage compares, on one idle one-node agent with
// the machine's container engine, submit -> running for a process job
// ("process") and for the same job in an image the node holds ("image"),
// in one run for the ratio. "engine" is the floor under the image job:
// the engine's own create, attach and start of the same container,
// through the engine client, with no skein in between.
func BenchmarkSubmitToRunningImage(b *testing.B) {
	image := testutil.BusyboxImage(b)
	cfg := testConfig(b, b.TempDir())
	cfg.ContainerSocket = DefaultContainerSocket
	a, c := startBenchAgent(b, cfg)
	b.Run("process", func(b *testing.B) {
		benchSubmitSpecToRunning(b, a, c, structs.JobSpec{Command: []string{"true"}, GPUs: 1})
	})
	b.Run("image", func(b *testing.B) {
		benchSubmitSpecToRunning(b, a, c, structs.JobSpec{Command: []string{"true"}, GPUs: 1, Image: image})
	})
	b.Run("engine", func(b *testing.B) { benchEngineStart(b, image) })
}

// benchEngineStart times create, attach and start of a container running
// true, b.N times; the container's end and removal are not timed.
func benchEngineStart(b *testing.B, image string) {
	d, err := engine.NewDocker(DefaultContainerSocket)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	started := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		id, err := d.Create(ctx, engine.ContainerSpec{Name: fmt.Sprintf("skein-bench-%d-%d", time.Now().UnixNano(), i),
			Image: image, Cmd: []string{"true"}, Labels: map[string]string{engine.LabelAlloc: "bench"}})
		if err != nil {
			b.Fatal(err)
		}
		done, err := d.Attach(ctx, id, io.Discard, io.Discard)
		if err == nil {
			err = d.Start(ctx, id)
		}
		started = append(started, time.Since(t0))
		b.StopTimer()
		if err == nil {
			<-done
			_, err = d.Wait(ctx, id)
		}
		if rerr := d.Remove(ctx, id); err == nil {
			err = rerr
		}
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	report(b, "started", started)
}
