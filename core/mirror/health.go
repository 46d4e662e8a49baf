package mirror

import (
	"fmt"
	"time"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/partition"
)

// NotReady implements daemon.Readiness: the http.readyz.* checks. A
// cluster unreachable for longer than http.readyz.cluster.unreachable.ms,
// and more FAILED partitions than http.readyz.failed.partitions.max, make
// the daemon not ready; each reason names the mirror and cluster, or the
// count.
func (e *Engine) NotReady(cfg *config.Config, now time.Time) []string {
	if cfg == nil || (cfg.ReadyzClusterUnreachable <= 0 && cfg.ReadyzFailedPartitionsMax < 0) {
		return nil
	}
	var why []string
	failed := 0
	for _, ms := range e.Status().Mirrors {
		if cfg.ReadyzClusterUnreachable > 0 {
			for _, c := range ms.Clusters {
				if down := now.Sub(c.Since); !c.Reachable && down > cfg.ReadyzClusterUnreachable {
					why = append(why, fmt.Sprintf("mirror %s: the %s cluster has been unreachable for %s (more than http.readyz.cluster.unreachable.ms %s): %s",
						ms.Name, c.Cluster, down.Round(time.Second), cfg.ReadyzClusterUnreachable, c.LastError))
				}
			}
		}
		for _, p := range ms.Partitions {
			if p.State == partition.Failed.String() {
				failed++
			}
		}
	}
	if cfg.ReadyzFailedPartitionsMax >= 0 && failed > cfg.ReadyzFailedPartitionsMax {
		why = append(why, fmt.Sprintf("%d partitions are FAILED (more than http.readyz.failed.partitions.max %d)", failed, cfg.ReadyzFailedPartitionsMax))
	}
	return why
}
