package proc

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// Machine describes where the bench ran.
type Machine struct {
	CPUs     int
	CPUModel string
	MemBytes int64
	Kernel   string
	GoVer    string
	Java     string
	LoadAvg  [2]string // at start and at end
}

// DescribeMachine reads the machine's description from /proc.
func DescribeMachine(java string) Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVer: runtime.Version(), CPUModel: "unknown", Kernel: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPUModel = cpuModel(b)
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if n, err := parseStatusKiB(b, "MemTotal"); err == nil {
			m.MemBytes = n
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if out, err := exec.Command(java, "-version").CombinedOutput(); err == nil {
		m.Java = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	}
	return m
}

// cpuModel returns the first "model name" of /proc/cpuinfo.
func cpuModel(cpuinfo []byte) string {
	for line := range bytes.SplitSeq(cpuinfo, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if ok && string(bytes.TrimSpace(k)) == "model name" {
			return string(bytes.TrimSpace(v))
		}
	}
	return "unknown"
}

// LoadAverage returns the 1-minute load average from /proc/loadavg.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
