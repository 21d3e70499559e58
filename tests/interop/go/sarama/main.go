// A sarama client run by tests/interop/test_client_matrix.py: the steps of
// tests/interop/SCENARIOS.md with sarama's own APIs, one JSON report on the last line.
//
//	sarama-scenarios -bootstrap HOST:PORT -topic T -group G [-messages N] [-version 0.11.0.0]
//
// Without -version sarama keeps its default configuration (DefaultVersion: Kafka 2.8's
// versions). With it sarama speaks that release's versions, and what the release lacks
// (a codec, a step) is left out and said so in the report.
package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

const program = "sarama-scenarios"

// The Kafka release whose versions a step needs; speaking an older one skips it. The
// floor is 0.10.2 (sarama's consumer groups): create times and ListOffsets by time are
// always there.
var stepNeeds = map[string]sarama.KafkaVersion{
	"describe_configs": sarama.V0_11_0_0, // DescribeConfigs
	"headers":          sarama.V0_11_0_0, // record batches (magic 2)
}

var codecs = []struct {
	name  string
	codec sarama.CompressionCodec
	needs sarama.KafkaVersion
}{
	{"none", sarama.CompressionNone, sarama.MinVersion},
	{"gzip", sarama.CompressionGZIP, sarama.MinVersion},
	{"snappy", sarama.CompressionSnappy, sarama.MinVersion},
	{"lz4", sarama.CompressionLZ4, sarama.V0_10_0_0},
	{"zstd", sarama.CompressionZSTD, sarama.V2_1_0_0},
}

type run struct {
	*scenario
	addrs   []string
	version sarama.KafkaVersion
}

func main() {
	o := parseOptions("Kafka version to speak (default: sarama's)")
	r := &run{scenario: newScenario("sarama", o), addrs: []string{o.bootstrap},
		version: sarama.DefaultVersion}
	if o.version != "" {
		parsed, err := sarama.ParseKafkaVersion(o.version)
		if err != nil {
			fail("version", err)
		}
		r.version = parsed
	}
	if !r.version.IsAtLeast(sarama.V0_10_2_0) {
		fail("version", errors.New("sarama's consumer groups need Kafka 0.10.2 or newer"))
	}
	r.Version = r.version.String()
	for step, needs := range stepNeeds {
		if !r.version.IsAtLeast(needs) {
			r.skip(step, fmt.Sprintf("needs Kafka %s's versions; sarama speaks %s's", needs, r.version))
		}
	}
	r.skip("rebalance_consumer_protocol",
		"sarama has only the classic group protocol (JoinGroup, SyncGroup), not KIP-848's ConsumerGroupHeartbeat")

	admin, err := sarama.NewClusterAdmin(r.addrs, r.config())
	if err != nil {
		fail("admin", err)
	}
	client, err := sarama.NewClient(r.addrs, r.config())
	if err != nil {
		fail("client", err)
	}

	r.do("create_topic", func() error {
		return admin.CreateTopic(r.topic, &sarama.TopicDetail{
			NumPartitions: partitions, ReplicationFactor: 1,
			ConfigEntries: map[string]*string{"retention.ms": ptr(retention)},
		}, false)
	})
	r.do("describe_configs", func() error { return r.describeConfigs(admin) })
	r.do("produce", func() error { return r.produce(!r.skipped("headers")) })
	r.done("headers", "timestamps", "keyed")
	r.do("consume_group", func() (err error) {
		r.Consumed, err = r.consume(r.group, sarama.OffsetOldest, r.count, nil)
		return err
	})
	r.do("committed", func() error { return r.committed(admin) })
	r.do("list_offsets", func() error { return r.listOffsets(client) })
	r.do("offsets_for_time", func() error { return r.offsetsForTime(client) })
	r.do("from_timestamp", func() error { return r.fromTimestamp(client) })
	r.do("from_latest", r.fromLatest)
	r.do("rebalance", r.rebalance)
	r.do("list_groups", func() error {
		groups, err := admin.ListConsumerGroups()
		for name := range groups {
			r.Groups = append(r.Groups, name)
		}
		sort.Strings(r.Groups)
		return err
	})
	r.do("describe_group", func() error {
		described, err := admin.DescribeConsumerGroups([]string{r.group})
		if err == nil {
			r.GroupState = described[0].State
		}
		return err
	})
	r.transact(&txn{run: r, admin: admin, client: client, topic: r.topic + "-txn", id: r.group + "-txn"})
	r.do("delete_topic", func() error { return admin.DeleteTopic(r.topic) })

	client.Close()
	admin.Close()
	r.finish()
}

// config is a fresh configuration for one client, which it may change (the codec, the
// initial offset) without touching the others'.
func (r *run) config() *sarama.Config {
	config := sarama.NewConfig()
	config.ClientID = program
	config.Version = r.version
	config.Producer.Return.Successes = true
	config.Producer.RequiredAcks = sarama.WaitForAll
	config.Consumer.Offsets.Initial = sarama.OffsetOldest
	return config
}

func (r *run) describeConfigs(admin sarama.ClusterAdmin) error {
	var entries []sarama.ConfigEntry
	var err error
	// Kafka's metadata knows a new topic a moment after creating it.
	for attempt := 0; attempt < 100; attempt++ {
		entries, err = admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: r.topic})
		if !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.TopicConfigs, r.DefaultConfig = map[string]string{}, map[string]bool{}
	for _, entry := range entries {
		r.TopicConfigs[entry.Name] = entry.Value
		r.DefaultConfig[entry.Name] = entry.Default || entry.Source == sarama.SourceDefault
	}
	return err
}

// produce sends message i with codecs[i % len(codecs)], one SyncProducer per codec;
// the keys go through sarama's default partitioner (NewHashPartitioner: FNV-1a).
func (r *run) produce(headers bool) error {
	var producers []sarama.SyncProducer
	for _, c := range codecs {
		if !r.version.IsAtLeast(c.needs) {
			continue
		}
		config := r.config()
		config.Producer.Compression = c.codec
		producer, err := sarama.NewSyncProducer(r.addrs, config)
		if err != nil {
			return fmt.Errorf("%s producer: %w", c.name, err)
		}
		defer producer.Close()
		producers = append(producers, producer)
		r.Codecs = append(r.Codecs, c.name)
	}
	for i := 0; i < r.count; i++ {
		key := messageKey(i)
		message := &sarama.ProducerMessage{
			Topic: r.topic, Key: sarama.StringEncoder(key), Value: sarama.StringEncoder("value-" + key),
			Timestamp: time.UnixMilli(r.timestamp(i)),
		}
		if headers {
			message.Headers = []sarama.RecordHeader{{Key: []byte("origin"), Value: []byte("header-" + key)}}
		}
		partition, _, err := producers[i%len(producers)].SendMessage(message)
		if err != nil {
			return fmt.Errorf("%s with %s: %w", key, r.Codecs[i%len(producers)], err)
		}
		r.Produced[key] = partition
	}
	r.Partitioner = "fnv1a"
	return nil
}

// collector gathers what a group member reads, marking each message for the commit,
// and ends the session once it holds want records.
type collector struct {
	mu      sync.Mutex
	records map[string]record
	want    int
	done    context.CancelFunc
}

func (c *collector) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (c *collector) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (c *collector) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for message := range claim.Messages() {
		session.MarkMessage(message, "")
		headers := map[string]string{}
		for _, header := range message.Headers {
			headers[string(header.Key)] = string(header.Value)
		}
		c.mu.Lock()
		c.records[string(message.Key)] = record{string(message.Value), message.Partition,
			message.Offset, message.Timestamp.UnixMilli(), headers}
		complete := len(c.records) >= c.want
		c.mu.Unlock()
		if complete {
			session.Commit()
			c.done()
		}
	}
	return nil
}

// consume reads T in group from initial (where the group has no offsets) until want
// records are in, commits, leaves the group; alongside, if given, runs meanwhile.
func (r *run) consume(group string, initial int64, want int, alongside func(context.Context) error) (map[string]record, error) {
	config := r.config()
	config.Consumer.Offsets.Initial = initial
	consumer, err := sarama.NewConsumerGroup(r.addrs, group, config)
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	collect := &collector{records: map[string]record{}, want: want, done: stop}
	side := make(chan error, 1)
	if alongside != nil {
		go func() {
			err := alongside(ctx)
			side <- err
			if err != nil {
				stop()
			}
		}()
	}
	for ctx.Err() == nil {
		if err := consumer.Consume(ctx, []string{r.topic}, collect); err != nil {
			return nil, err
		}
	}
	if alongside != nil {
		if err := <-side; err != nil {
			return nil, err
		}
	}
	return collect.records, consumer.Close()
}

func (r *run) committed(admin sarama.ClusterAdmin) error {
	offsets, err := admin.ListConsumerGroupOffsets(r.group, map[string][]int32{r.topic: {0, 1, 2}})
	if err != nil {
		return err
	}
	r.Committed = map[int32]int64{}
	for partition := int32(0); partition < partitions; partition++ {
		block := offsets.GetBlock(r.topic, partition)
		if block == nil {
			return fmt.Errorf("partition %d missing", partition)
		}
		if !errors.Is(block.Err, sarama.ErrNoError) {
			return fmt.Errorf("partition %d: %w", partition, block.Err)
		}
		r.Committed[partition] = block.Offset
	}
	return nil
}

func (r *run) listOffsets(client sarama.Client) (err error) {
	for partition := int32(0); partition < partitions && err == nil; partition++ {
		if r.Oldest[partition], err = client.GetOffset(r.topic, partition, sarama.OffsetOldest); err == nil {
			r.Newest[partition], err = client.GetOffset(r.topic, partition, sarama.OffsetNewest)
		}
	}
	return err
}

// offsetsForTime asks with GetOffset given a time: ListOffsets answers -1 where no
// message is that late.
func (r *run) offsetsForTime(client sarama.Client) (err error) {
	r.TimeTarget = r.timestamp(r.count / 2)
	r.OffsetsForTime = map[int32]int64{}
	for partition := int32(0); partition < partitions && err == nil; partition++ {
		r.OffsetsForTime[partition], err = client.GetOffset(r.topic, partition, r.TimeTarget)
	}
	return err
}

// fromTimestamp reads each partition with a partition consumer from the offset for the
// time up to the newest offset listed.
func (r *run) fromTimestamp(client sarama.Client) error {
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return err
	}
	defer consumer.Close()
	r.FromTimestamp = []string{}
	for partition, offset := range r.OffsetsForTime {
		if offset < 0 {
			continue
		}
		reader, err := consumer.ConsumePartition(r.topic, partition, offset)
		if err != nil {
			return fmt.Errorf("partition %d: %w", partition, err)
		}
		for message := range reader.Messages() {
			r.FromTimestamp = append(r.FromTimestamp, string(message.Key))
			if message.Offset >= r.Newest[partition]-1 {
				break
			}
		}
		if err := reader.Close(); err != nil {
			return fmt.Errorf("partition %d: %w", partition, err)
		}
	}
	sort.Strings(r.FromTimestamp)
	return nil
}

// fromLatest starts group G-latest at the newest offsets (it has none committed) and
// produces late messages until it reads one.
func (r *run) fromLatest() error {
	producer, err := sarama.NewSyncProducer(r.addrs, r.config())
	if err != nil {
		return err
	}
	defer producer.Close()
	records, err := r.consume(r.group+"-latest", sarama.OffsetNewest, 1, func(ctx context.Context) error {
		for i := 0; i < lateLimit; i++ {
			key := lateKey(i)
			_, _, err := producer.SendMessage(&sarama.ProducerMessage{
				Topic: r.topic, Key: sarama.StringEncoder(key), Value: sarama.StringEncoder("value-" + key),
			})
			if err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(lateEvery):
			}
		}
		return fmt.Errorf("nothing read after %d late messages", lateLimit)
	})
	r.FromLatest = sortedKeys(records)
	return err
}

// member is one consumer of the rebalance step; it holds the claims of its current
// session (sarama rebalances eagerly: a member gives up everything between sessions).
type member struct {
	group sarama.ConsumerGroup
	mu    sync.Mutex
	held  []int32
}

func (m *member) hold(partitions []int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.held = partitions
}

func (m *member) holding() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held
}

func (m *member) Setup(session sarama.ConsumerGroupSession) error {
	var claimed []int32
	for _, partitions := range session.Claims() {
		claimed = append(claimed, partitions...)
	}
	slices.Sort(claimed)
	m.hold(claimed)
	return nil
}

func (m *member) Cleanup(sarama.ConsumerGroupSession) error { m.hold(nil); return nil }

func (m *member) ConsumeClaim(_ sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for range claim.Messages() {
	}
	return nil
}

// rebalance runs two members of G-trio, then three, each in its own Consume loop.
func (r *run) rebalance() error {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var running sync.WaitGroup
	failed := make(chan error, 3)
	members, err := grow(func() (*member, error) {
		group, err := sarama.NewConsumerGroup(r.addrs, r.group+"-trio", r.config())
		if err != nil {
			return nil, err
		}
		m := &member{group: group}
		running.Add(1)
		go func() {
			defer running.Done()
			for ctx.Err() == nil {
				if err := group.Consume(ctx, []string{r.topic}, m); err != nil {
					failed <- err
					return
				}
			}
		}()
		return m, nil
	}, failed, &r.GroupOfTwo, &r.GroupOfThree)
	if err != nil {
		return err
	}
	stop()
	running.Wait()
	for _, m := range members {
		err = errors.Join(err, m.group.Close())
	}
	return err
}

// txn does the transactions steps with sarama's transactional SyncProducer: the
// offset goes with the first transaction through AddOffsetsToTxn.
type txn struct {
	*run
	admin         sarama.ClusterAdmin
	client        sarama.Client
	topic, id     string
	first, second sarama.SyncProducer
}

// producer is a transactional producer of T-txn; sarama initialises the transactional
// id (InitProducerId) as it creates it.
func (t *txn) producer() (sarama.SyncProducer, error) {
	config := t.config()
	config.Producer.Idempotent = true
	config.Producer.Transaction.ID = t.id
	config.Net.MaxOpenRequests = 1
	return sarama.NewSyncProducer(t.addrs, config)
}

func (t *txn) messages(kind string) []*sarama.ProducerMessage {
	var messages []*sarama.ProducerMessage
	for _, key := range txnKeys(kind) {
		messages = append(messages, &sarama.ProducerMessage{
			Topic: t.topic, Key: sarama.StringEncoder(key), Value: sarama.StringEncoder("value-" + key),
		})
	}
	return messages
}

// send sends messages in a transaction of producer, then ends it with end.
func send(producer sarama.SyncProducer, messages []*sarama.ProducerMessage, before func() error, end func() error) error {
	if err := producer.BeginTxn(); err != nil {
		return err
	}
	if err := producer.SendMessages(messages); err != nil {
		return err
	}
	if before != nil {
		if err := before(); err != nil {
			return err
		}
	}
	return end()
}

func (t *txn) createTopic() error {
	return t.admin.CreateTopic(t.topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false)
}

func (t *txn) commit(offsets bool) (err error) {
	if t.first, err = t.producer(); err != nil {
		return err
	}
	var addOffsets func() error
	if offsets {
		addOffsets = func() error {
			return t.first.AddOffsetsToTxn(map[string][]*sarama.PartitionOffsetMetadata{
				t.run.topic: {{Partition: 0, Offset: 1}},
			}, t.id)
		}
	}
	return send(t.first, t.messages("commit"), addOffsets, t.first.CommitTxn)
}

func (t *txn) abort() error {
	return send(t.first, t.messages("abort"), nil, t.first.AbortTxn)
}

func (t *txn) fence() (string, error) {
	var err error
	if t.second, err = t.producer(); err != nil {
		return "", fmt.Errorf("second producer: %w", err)
	}
	fenced := t.first.BeginTxn()
	if fenced == nil {
		_, _, fenced = t.first.SendMessage(t.messages("zombie")[0])
		if committed := t.first.CommitTxn(); fenced == nil {
			fenced = committed
		}
	}
	if fenced == nil {
		return "", errors.New("the fenced producer committed")
	}
	if err := send(t.second, t.messages("after"), nil, t.second.CommitTxn); err != nil {
		return "", fmt.Errorf("second producer: %w", err)
	}
	return fenced.Error(), nil
}

func (t *txn) close() error {
	t.first.Close() // fenced: its error again
	if t.second != nil {
		return t.second.Close()
	}
	return nil
}

// transactionOffsets asks G-txn's coordinator with require_stable where OffsetFetch has
// it (v7, Kafka 2.5): until Kafka has written the commit's markers it answers
// UNSTABLE_OFFSET_COMMIT. Before that it answers what is committed, the transaction's
// offsets once they are: the driver asks again until some are.
func (t *txn) transactionOffsets() (map[int32]int64, error) {
	deadline := time.Now().Add(txnSettle)
	for {
		request := sarama.NewOffsetFetchRequest(t.version, t.id, map[string][]int32{t.run.topic: {0, 1, 2}})
		request.RequireStable = request.Version >= 7
		coordinator, err := t.client.Coordinator(t.id)
		if err != nil {
			return nil, err
		}
		fetched, err := coordinator.FetchOffset(request)
		if err != nil {
			return nil, err
		}
		offsets, unstable := map[int32]int64{}, false
		for partition := int32(0); partition < partitions; partition++ {
			block := fetched.GetBlock(t.run.topic, partition)
			switch {
			case block == nil:
				return nil, fmt.Errorf("partition %d missing", partition)
			case errors.Is(block.Err, sarama.ErrUnstableOffsetCommit):
				unstable = true
			case !errors.Is(block.Err, sarama.ErrNoError):
				return nil, fmt.Errorf("partition %d: %w", partition, block.Err)
			case block.Offset >= 0: // -1: none committed
				offsets[partition] = block.Offset
			}
		}
		if (unstable || len(offsets) == 0) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if unstable {
			return offsets, errors.New("still unstable")
		}
		return offsets, nil
	}
}

// lastStable lists T-txn's read_committed end offsets: ListOffsets (v2 on, Kafka 0.11)
// at isolation level read_committed, which client.GetOffset does not set.
func (t *txn) lastStable() (map[int32]int64, error) {
	ends := map[int32]int64{}
	for partition := int32(0); partition < partitions; partition++ {
		leader, err := t.client.Leader(t.topic, partition)
		if err != nil {
			return nil, err
		}
		request := sarama.NewOffsetRequest(t.version)
		request.IsolationLevel = sarama.ReadCommitted
		request.AddBlock(t.topic, partition, sarama.OffsetNewest, 1)
		listed, err := leader.GetAvailableOffsets(request)
		if err != nil {
			return nil, err
		}
		block := listed.GetBlock(t.topic, partition)
		if block == nil {
			return nil, fmt.Errorf("partition %d missing", partition)
		}
		if !errors.Is(block.Err, sarama.ErrNoError) {
			return nil, fmt.Errorf("partition %d: %w", partition, block.Err)
		}
		ends[partition] = block.Offset
	}
	return ends, nil
}

func (t *txn) highWatermarks() (map[int32]int64, error) {
	ends := map[int32]int64{}
	for partition := int32(0); partition < partitions; partition++ {
		end, err := t.client.GetOffset(t.topic, partition, sarama.OffsetNewest)
		if err != nil {
			return nil, err
		}
		ends[partition] = end
	}
	return ends, nil
}

// txnQuiet is how long a read_committed partition consumer delivers nothing before the
// driver takes it to be at the end: sarama keeps its position to itself and drops the
// control records, the last of each partition, so nothing it delivers says so. The end
// offsets are stable before it starts, and one fetch answers all of them.
const txnQuiet = 2 * time.Second

// readCommitted reads T-txn with a read_committed partition consumer per partition,
// from the oldest offset, once Kafka has written the markers.
func (t *txn) readCommitted() ([]string, error) {
	ends, err := settled(t.lastStable, t.highWatermarks)
	if err != nil {
		return nil, err
	}
	config := t.config()
	config.Consumer.IsolationLevel = sarama.ReadCommitted
	consumer, err := sarama.NewConsumer(t.addrs, config)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	keys := []string{}
	var mu sync.Mutex
	var reading sync.WaitGroup
	failed := make(chan error, partitions)
	for partition, end := range ends {
		if end == 0 {
			continue
		}
		reader, err := consumer.ConsumePartition(t.topic, partition, sarama.OffsetOldest)
		if err != nil {
			return nil, fmt.Errorf("partition %d: %w", partition, err)
		}
		reading.Add(1)
		go func() {
			defer reading.Done()
			defer reader.AsyncClose()
			for {
				select {
				case message := <-reader.Messages():
					if message.Offset >= end {
						failed <- fmt.Errorf("partition %d: offset %d past the end %d", partition, message.Offset, end)
						return
					}
					mu.Lock()
					keys = append(keys, string(message.Key))
					mu.Unlock()
				case err := <-reader.Errors():
					failed <- fmt.Errorf("partition %d: %w", partition, err)
					return
				case <-time.After(txnQuiet):
					return
				}
			}
		}()
	}
	reading.Wait()
	close(failed)
	return keys, <-failed
}
