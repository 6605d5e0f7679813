package node

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/structs"
)

// maxMetricsBytes bounds what is read of a replica's /metrics.
const maxMetricsBytes = 4 << 20

// loadLoop tells the leader, every LoadInterval, what this node sees of
// the load of the autoscaled services (structs.ServiceLoad): the requests
// its ingress has in flight to each, the gauge of each of their replicas
// here, or the utilisation of the GPUs those replicas hold. Services
// without autoscale cost nothing; a report that does not reach the
// leader is not sent again (the next one replaces it).
func (n *Node) loadLoop() {
	if n.cfg.LoadInterval <= 0 {
		return
	}
	tick := time.NewTicker(n.cfg.LoadInterval)
	defer tick.Stop()
	client := &http.Client{Timeout: n.cfg.LoadInterval}
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-tick.C:
		}
		loads := n.serviceLoads(client)
		if len(loads) == 0 {
			continue
		}
		if err := n.writeLoads(loads); err != nil {
			n.log.Debug("report service load", "error", err)
		}
	}
}

// serviceLoads is this node's view of the autoscaled services' load.
func (n *Node) serviceLoads(client *http.Client) []structs.ServiceLoad {
	byName := map[string]*structs.ServiceLoad{}
	var order []string
	for _, svc := range n.view.Services() {
		if svc.Autoscale == nil || svc.Deleted {
			continue
		}
		l := &structs.ServiceLoad{Service: svc.Name}
		if svc.Autoscale.Metric == structs.AutoscaleInFlight {
			if n.cfg.InFlight == nil {
				continue
			}
			for _, v := range n.cfg.InFlight(svc.Name) {
				l.InFlight += v
			}
		}
		byName[svc.Name] = l
		order = append(order, svc.Name)
	}
	if len(order) == 0 {
		return nil
	}
	var util map[string]float64 // by GPU UUID, read once when first needed
	for _, alloc := range n.view.NodeLiveAllocs(n.cfg.NodeID) {
		if alloc.State != structs.AllocRunning || alloc.DesiredState == structs.DesiredStop {
			continue
		}
		job, ok := n.view.Job(alloc.JobID)
		if !ok || byName[job.Service] == nil {
			continue
		}
		svc, ok := n.view.Service(job.Service)
		if !ok || svc.Autoscale == nil {
			continue
		}
		l := byName[job.Service]
		if svc.Autoscale.Metric == structs.AutoscaleGPU {
			if util == nil {
				util = n.gpuUtil()
			}
			for _, uuid := range alloc.GPUs {
				if v, ok := util[uuid]; ok {
					l.GPUUtil += v
					l.GPUs++
				}
			}
			continue
		}
		gauge, ok := svc.Autoscale.Gauge()
		if !ok {
			continue
		}
		v, err := scrapeGauge(n.ctx, client, masterPortOf(alloc, job), gauge)
		if err != nil {
			n.log.Debug("scrape replica gauge", "alloc", alloc.ID, "gauge", gauge, "error", err)
			continue
		}
		if l.Gauges == nil {
			l.Gauges = map[string]float64{}
		}
		l.Gauges[alloc.ID] = v
	}
	slices.Sort(order)
	out := make([]structs.ServiceLoad, len(order))
	for i, name := range order {
		out[i] = *byName[name]
	}
	return out
}

// gpuUtil is the latest utilisation of each of this node's GPUs that
// has one, by UUID; empty without telemetry.
func (n *Node) gpuUtil() map[string]float64 {
	out := map[string]float64{}
	if n.cfg.Telemetry == nil {
		return out
	}
	for _, s := range n.cfg.Telemetry.Sample() {
		if s.Has&gpu.HasUtil != 0 {
			out[s.UUID] = s.UtilPercent
		}
	}
	return out
}

// errNoGauge says a replica's /metrics has no sample of the gauge.
type errNoGauge string

func (e errNoGauge) Error() string { return "no sample of " + string(e) + " in /metrics" }

// scrapeGauge reads a gauge from the replica's Prometheus text metrics on
// port: its unlabelled value, or the sum over its label sets.
func scrapeGauge(ctx context.Context, client *http.Client, port int, gauge string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+localAddr(port)+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, &httpStatusError{resp.StatusCode}
	}
	return parseGauge(io.LimitReader(resp.Body, maxMetricsBytes), gauge)
}

type httpStatusError struct{ code int }

func (e *httpStatusError) Error() string { return "GET /metrics: " + strconv.Itoa(e.code) }

// parseGauge sums the samples of gauge in Prometheus text format: lines
// "NAME VALUE [TIMESTAMP]" or "NAME{LABELS} VALUE [TIMESTAMP]".
func parseGauge(r io.Reader, gauge string) (float64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var sum float64
	found := false
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, gauge)
		if !ok || rest == "" {
			continue
		}
		switch rest[0] {
		case '{':
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			rest = rest[end+1:]
		case ' ', '\t':
		default:
			continue // another metric whose name starts with this one's
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, errNoGauge(gauge)
	}
	return sum, nil
}
