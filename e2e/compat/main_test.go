package compat

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// DefaultVersions are the source versions tested when KMIRROR_COMPAT_VERSIONS
// is unset: the whole matrix, which `make test` (and so CI) runs.
const DefaultVersions = "2.8.2,3.6.2,3.9.1,4.4.0"

// destination is the one-broker destination cluster of every test, on the
// harness's default Kafka version, started by TestMain.
var destination *kafkatest.Cluster

// versions are the source versions under test.
func versions() []string {
	v := os.Getenv("KMIRROR_COMPAT_VERSIONS")
	if strings.TrimSpace(v) == "" {
		v = DefaultVersions
	}
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	destination, err = kafkatest.Start(ctx, kafkatest.Options{Name: "destination"})
	if err != nil {
		fmt.Fprintf(os.Stderr, "compat: starting the destination cluster: %v\n", err)
		return 1
	}
	defer func() {
		if err := destination.Close(); err != nil {
			log.Printf("compat: %v", err)
		}
	}()
	log.Printf("compat: destination on Apache Kafka %s; source versions %v", destination.Version(), versions())
	return m.Run()
}
