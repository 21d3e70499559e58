// Go programs for the anchor benchmarks (python -m bench.anchors).
//
//	gobench kfake           a one-broker franz-go kfake cluster on a loopback port: prints
//	                        "READY host:port" once it listens, then serves until stdin closes
//	gobench kfake-startup   starts a kfake cluster in this process, sends one Metadata v1
//	                        request over a fresh socket and prints the milliseconds to its
//	                        answer; twice (cold, warm)
//	gobench consume BOOTSTRAP TOPIC COUNT
//	                        reads COUNT records from every partition of TOPIC from the start
//	                        with franz-go (no group) and prints "COUNT SECONDS"
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func fail(what string, err error) {
	fmt.Fprintln(os.Stderr, what+":", err)
	os.Exit(1)
}

func newCluster() *kfake.Cluster {
	cluster, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.Ports(0),
		kfake.ListenFn(listenLoopback),
	)
	if err != nil {
		fail("kfake", err)
	}
	return cluster
}

func startOnce() float64 {
	started := time.Now()
	cluster := newCluster()
	defer cluster.Close()
	if err := metadataV1(cluster.ListenAddrs()[0]); err != nil {
		fail("metadata", err)
	}
	return float64(time.Since(started).Microseconds()) / 1000
}

func consume(bootstrap, topic string, count int) {
	client, err := kgo.NewClient(
		kgo.SeedBrokers(bootstrap),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		fail("client", err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	started := time.Now()
	received := 0
	for received < count {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			fail(fmt.Sprintf("fetch %s[%d]", topic, partition), err)
		})
		received += fetches.NumRecords()
	}
	fmt.Printf("%d %.6f\n", received, time.Since(started).Seconds())
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gobench kfake | kfake-startup | consume BOOTSTRAP TOPIC COUNT")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "kfake-startup":
		cold := startOnce()
		fmt.Printf("%.3f %.3f\n", cold, startOnce())
	case "consume":
		count, err := strconv.Atoi(os.Args[4])
		if err != nil {
			fail("count", err)
		}
		consume(os.Args[2], os.Args[3], count)
	default:
		cluster := newCluster()
		defer cluster.Close()
		fmt.Printf("READY %s\n", cluster.ListenAddrs()[0])
		_, _ = io.Copy(io.Discard, os.Stdin)
	}
}
