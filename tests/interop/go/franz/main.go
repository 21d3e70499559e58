// A franz-go client run by tests/interop/test_client_matrix.py against a broker.
//
//	franz-scenarios -bootstrap HOST:PORT -topic T -group G [-messages N] [-version 3.9.0]
//
// Without -version franz-go negotiates its newest versions with the broker
// (ApiVersions); with it, requests are capped at that Kafka release's versions. It
// creates the topic, produces keyed gzip messages, consumes them in a consumer group,
// commits, and prints one JSON object with what it saw (the same report as
// tests/interop/go/sarama); the test checks it against the broker.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

const partitions = 3

type report struct {
	Client        string            `json:"client"`
	Version       string            `json:"version"`
	Produced      map[string]int64  `json:"produced"`  // key -> partition
	Consumed      map[string]string `json:"consumed"`  // key -> value
	Headers       map[string]string `json:"headers"`   // key -> its "origin" header
	Committed     map[int32]int64   `json:"committed"` // partition -> offset
	Newest        map[int32]int64   `json:"newest"`    // partition -> high watermark
	Oldest        map[int32]int64   `json:"oldest"`
	TopicConfigs  map[string]string `json:"topic_configs"`
	DefaultConfig map[string]bool   `json:"default_config"`
	Groups        []string          `json:"groups"`
	GroupState    string            `json:"group_state"`
}

func check(err error, what string) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "franz-scenarios: %s: %v\n", what, err)
		os.Exit(1)
	}
}

// kgoVersion is the version of the franz-go module this binary was built with.
func kgoVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/twmb/franz-go" {
				if dep.Replace != nil {
					dep = dep.Replace
				}
				if dep.Version != "" {
					return dep.Version
				}
			}
		}
	}
	return "default"
}

func main() {
	bootstrap := flag.String("bootstrap", "", "broker address")
	topic := flag.String("topic", "", "topic to create and use")
	group := flag.String("group", "", "consumer group id")
	version := flag.String("version", "", "Kafka version to speak at most (default: franz-go's newest)")
	count := flag.Int("messages", 30, "messages to produce")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	base := []kgo.Opt{
		kgo.SeedBrokers(*bootstrap),
		kgo.ClientID("franz-scenarios"),
	}
	out := report{
		Client:        "franz-go",
		Version:       kgoVersion(),
		Produced:      map[string]int64{},
		Consumed:      map[string]string{},
		Headers:       map[string]string{},
		Committed:     map[int32]int64{},
		Newest:        map[int32]int64{},
		Oldest:        map[int32]int64{},
		TopicConfigs:  map[string]string{},
		DefaultConfig: map[string]bool{},
	}
	if *version != "" {
		versions := kversion.FromString(*version)
		if versions == nil {
			check(fmt.Errorf("unknown Kafka version %q", *version), "version")
		}
		base = append(base, kgo.MaxVersions(versions))
		out.Version = *version
	}

	adminClient, err := kgo.NewClient(base...)
	check(err, "admin")
	defer adminClient.Close()
	admin := kadm.NewClient(adminClient)
	retention := "3600000"
	_, err = admin.CreateTopic(ctx, partitions, 1, map[string]*string{"retention.ms": &retention}, *topic)
	check(err, "create topic")
	// A real Kafka's metadata knows a topic a moment after creating it: until then,
	// describing it answers UNKNOWN_TOPIC_OR_PARTITION, and careful callers ask again.
	var resource kadm.ResourceConfig
	for attempt := 0; ; attempt++ {
		described, err := admin.DescribeTopicConfigs(ctx, *topic)
		check(err, "describe configs")
		resource, err = described.On(*topic, nil)
		check(err, "describe configs")
		if !errors.Is(resource.Err, kerr.UnknownTopicOrPartition) || attempt == 100 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	check(resource.Err, "describe configs")
	for _, config := range resource.Configs {
		value := ""
		if config.Value != nil {
			value = *config.Value
		}
		out.TopicConfigs[config.Key] = value
		out.DefaultConfig[config.Key] = config.Source == kmsg.ConfigSourceDefaultConfig
	}

	producer, err := kgo.NewClient(append(base,
		kgo.DefaultProduceTopic(*topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.GzipCompression()),
	)...)
	check(err, "producer")
	for i := 0; i < *count; i++ {
		key := fmt.Sprintf("key-%03d", i)
		record := &kgo.Record{
			Key:     []byte(key),
			Value:   []byte("value-" + key),
			Headers: []kgo.RecordHeader{{Key: "origin", Value: []byte("header-" + key)}},
		}
		check(producer.ProduceSync(ctx, record).FirstErr(), "produce")
		out.Produced[key] = int64(record.Partition)
	}
	check(producer.Flush(ctx), "producer flush")
	producer.Close()

	consumer, err := kgo.NewClient(append(base,
		kgo.ConsumerGroup(*group),
		kgo.ConsumeTopics(*topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
	)...)
	check(err, "consumer group")
	for len(out.Consumed) < *count {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			check(ctx.Err(), fmt.Sprintf("consumed %d of %d messages", len(out.Consumed), *count))
		}
		var errs []error
		fetches.EachError(func(t string, p int32, err error) {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", t, p, err))
		})
		check(errors.Join(errs...), "consume")
		fetches.EachRecord(func(record *kgo.Record) {
			key := string(record.Key)
			out.Consumed[key] = string(record.Value)
			for _, header := range record.Headers {
				if header.Key == "origin" {
					out.Headers[key] = string(header.Value)
				}
			}
		})
	}
	check(consumer.CommitUncommittedOffsets(ctx), "commit")
	consumer.Close() // leaves the group

	offsets, err := admin.FetchOffsets(ctx, *group)
	check(err, "fetch offsets")
	newest, err := admin.ListEndOffsets(ctx, *topic)
	check(err, "newest offsets")
	check(newest.Error(), "newest offsets")
	oldest, err := admin.ListStartOffsets(ctx, *topic)
	check(err, "oldest offsets")
	check(oldest.Error(), "oldest offsets")
	for partition := int32(0); partition < partitions; partition++ {
		if committed, ok := offsets.Lookup(*topic, partition); ok {
			check(committed.Err, "fetch offsets")
			out.Committed[partition] = committed.At
		}
		end, ok := newest.Lookup(*topic, partition)
		if !ok {
			check(fmt.Errorf("partition %d missing", partition), "newest offsets")
		}
		out.Newest[partition] = end.Offset
		start, ok := oldest.Lookup(*topic, partition)
		if !ok {
			check(fmt.Errorf("partition %d missing", partition), "oldest offsets")
		}
		out.Oldest[partition] = start.Offset
	}
	groups, err := admin.ListGroups(ctx)
	check(err, "list groups")
	out.Groups = groups.Groups()
	sort.Strings(out.Groups)
	describedGroups, err := admin.DescribeGroups(ctx, *group)
	check(err, "describe groups")
	check(describedGroups.Error(), "describe groups")
	describedGroup, err := describedGroups.On(*group, nil)
	check(err, "describe groups")
	out.GroupState = describedGroup.State
	_, err = admin.DeleteTopic(ctx, *topic)
	check(err, "delete topic")

	encoded, err := json.Marshal(out)
	check(err, "json")
	fmt.Println(string(encoded))
}
