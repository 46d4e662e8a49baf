// Command kmirror-bench measures kmirror against Apache Kafka's MirrorMaker 2
// and against a raw batch forwarder (the limit), on real Apache Kafka
// brokers started by the e2e harness (e2e/kafkatest), with the same data and
// broker settings for every contender, and writes a Markdown report with
// PNG charts.
//
//	go build -o bin/kmirror-bench ./bench
//	bin/kmirror-bench -out docs/benchmarks            # the full run (make bench)
//	bin/kmirror-bench -quick -out bench/out/quick     # a few small scenarios (make bench-quick)
//	bin/kmirror-bench -scenarios p500,p2000 -contenders kmirror,raw
//
// For each scenario it creates a source topic, loads it with Kafka's own
// producer (kafka-producer-perf-test: the batches are shaped as a Java
// producer shapes them), and runs each contender in turn against that same
// backlog: the contender's process starts, the bench polls the destination's
// end offsets until every partition holds the source's records, samples the
// contender's CPU time and peak RSS from /proc, optionally runs a latency
// phase at a fixed produce rate, checks record counts per partition, stops the
// contender and deletes the destination topics. See docs/benchmarks.md.
//
// `kmirror-bench raw` is the raw forwarder itself, run as its own process.
//
// This package parses the flags and runs the loop over scenarios and
// contenders; the rest lives under bench/internal, one package per job:
//
//	scenario    the scenarios, their quick variants, -scenarios selection
//	load        the backlog (kafka-producer-perf-test), the batch sample, the latency phase
//	contender   kmirror, MirrorMaker 2 and raw: configured, started, stopped as processes
//	proc        CPU time and peak RSS of a process tree, the quiet gate, the machine
//	topics      create (in steps), delete and list offsets of the bench's topics
//	raw         the raw forwarder (`kmirror-bench raw`) and its pipelined connection
//	report      results, the Markdown report, its charts and the targets' verdicts
//	stats       quantiles, rates and ratios
//
// The WAN round trip comes from the clusters' fault proxies
// (e2e/kafkatest/faultproxy). Imports run one way: scenario, stats, proc and topics import
// nothing of the bench's; report imports scenario, stats and proc; load and
// contender import scenario and report; raw imports topics.
package main

import (
	"fmt"
	"os"

	"github.com/kmirror/kmirror/bench/internal/raw"
)

func main() {
	var err error
	if len(os.Args) > 1 && os.Args[1] == "raw" {
		err = raw.Main(os.Args[2:])
	} else {
		err = benchMain(os.Args[1:])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kmirror-bench:", err)
		os.Exit(1)
	}
}
