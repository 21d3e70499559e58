// A sarama client run by tests/interop/test_sarama.py against a broker.
//
//	sarama-scenarios -bootstrap HOST:PORT -topic T -group G [-version 3.9.0]
//
// Without -version sarama keeps its default configuration (its default protocol
// version, offset commits with OffsetCommit v1). It creates the topic, produces keyed
// gzip messages, consumes them in a consumer group, commits, and prints one JSON
// object with what it saw; the test checks it against the broker.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/IBM/sarama"
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

type collector struct {
	mu       sync.Mutex
	consumed map[string]string
	headers  map[string]string
	want     int
	done     context.CancelFunc
}

func (c *collector) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (c *collector) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (c *collector) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for message := range claim.Messages() {
		session.MarkMessage(message, "")
		c.mu.Lock()
		c.consumed[string(message.Key)] = string(message.Value)
		for _, header := range message.Headers {
			if string(header.Key) == "origin" {
				c.headers[string(message.Key)] = string(header.Value)
			}
		}
		complete := len(c.consumed) == c.want
		c.mu.Unlock()
		if complete {
			session.Commit()
			c.done()
		}
	}
	return nil
}

func check(err error, what string) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "sarama-scenarios: %s: %v\n", what, err)
		os.Exit(1)
	}
}

func main() {
	bootstrap := flag.String("bootstrap", "", "broker address")
	topic := flag.String("topic", "", "topic to create and use")
	group := flag.String("group", "", "consumer group id")
	version := flag.String("version", "", "Kafka version to speak (default: sarama's)")
	count := flag.Int("messages", 30, "messages to produce")
	flag.Parse()
	addrs := []string{*bootstrap}

	config := sarama.NewConfig()
	config.ClientID = "sarama-scenarios"
	if *version != "" {
		parsed, err := sarama.ParseKafkaVersion(*version)
		check(err, "version")
		config.Version = parsed
	}
	config.Producer.Return.Successes = true
	config.Producer.RequiredAcks = sarama.WaitForAll
	config.Producer.Compression = sarama.CompressionGZIP
	config.Consumer.Offsets.Initial = sarama.OffsetOldest
	out := report{
		Client:        "sarama",
		Version:       config.Version.String(),
		Produced:      map[string]int64{},
		Committed:     map[int32]int64{},
		Newest:        map[int32]int64{},
		Oldest:        map[int32]int64{},
		TopicConfigs:  map[string]string{},
		DefaultConfig: map[string]bool{},
	}

	admin, err := sarama.NewClusterAdmin(addrs, config)
	check(err, "admin")
	defer admin.Close()
	retention := "3600000"
	check(admin.CreateTopic(*topic, &sarama.TopicDetail{
		NumPartitions:     partitions,
		ReplicationFactor: 1,
		ConfigEntries:     map[string]*string{"retention.ms": &retention},
	}, false), "create topic")
	// A real Kafka's metadata knows a topic a moment after creating it: until then,
	// describing it answers UNKNOWN_TOPIC_OR_PARTITION, and careful callers ask again.
	var entries []sarama.ConfigEntry
	for attempt := 0; ; attempt++ {
		entries, err = admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: *topic})
		if !errors.Is(err, sarama.ErrUnknownTopicOrPartition) || attempt == 100 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	check(err, "describe configs")
	for _, entry := range entries {
		out.TopicConfigs[entry.Name] = entry.Value
		out.DefaultConfig[entry.Name] = entry.Default || entry.Source == sarama.SourceDefault
	}

	producer, err := sarama.NewSyncProducer(addrs, config)
	check(err, "producer")
	for i := 0; i < *count; i++ {
		key := fmt.Sprintf("key-%03d", i)
		partition, _, err := producer.SendMessage(&sarama.ProducerMessage{
			Topic: *topic,
			Key:   sarama.StringEncoder(key),
			Value: sarama.StringEncoder("value-" + key),
			Headers: []sarama.RecordHeader{
				{Key: []byte("origin"), Value: []byte("header-" + key)},
			},
		})
		check(err, "produce")
		out.Produced[key] = int64(partition)
	}
	check(producer.Close(), "producer close")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	consuming, stop := context.WithCancel(ctx)
	collect := &collector{
		consumed: map[string]string{}, headers: map[string]string{}, want: *count, done: stop,
	}
	consumerGroup, err := sarama.NewConsumerGroup(addrs, *group, config)
	check(err, "consumer group")
	for consuming.Err() == nil {
		check(consumerGroup.Consume(consuming, []string{*topic}, collect), "consume")
	}
	check(consumerGroup.Close(), "consumer group close")
	if ctx.Err() != nil {
		check(ctx.Err(), fmt.Sprintf("consumed %d of %d messages", len(collect.consumed), *count))
	}
	out.Consumed = collect.consumed
	out.Headers = collect.headers

	wanted := map[string][]int32{*topic: {0, 1, 2}}
	offsets, err := admin.ListConsumerGroupOffsets(*group, wanted)
	check(err, "list consumer group offsets")
	client, err := sarama.NewClient(addrs, config)
	check(err, "client")
	defer client.Close()
	for partition := int32(0); partition < partitions; partition++ {
		block := offsets.GetBlock(*topic, partition)
		if block != nil {
			out.Committed[partition] = block.Offset
		}
		newest, err := client.GetOffset(*topic, partition, sarama.OffsetNewest)
		check(err, "newest offset")
		out.Newest[partition] = newest
		oldest, err := client.GetOffset(*topic, partition, sarama.OffsetOldest)
		check(err, "oldest offset")
		out.Oldest[partition] = oldest
	}
	groups, err := admin.ListConsumerGroups()
	check(err, "list groups")
	for name := range groups {
		out.Groups = append(out.Groups, name)
	}
	sort.Strings(out.Groups)
	described, err := admin.DescribeConsumerGroups([]string{*group})
	check(err, "describe groups")
	out.GroupState = described[0].State
	check(admin.DeleteTopic(*topic), "delete topic")

	encoded, err := json.Marshal(out)
	check(err, "json")
	fmt.Println(string(encoded))
}
