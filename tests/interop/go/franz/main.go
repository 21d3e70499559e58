// A franz-go client run by tests/interop/test_client_matrix.py: the steps of
// tests/interop/SCENARIOS.md with kgo and kadm, one JSON report on the last line.
//
//	franz-scenarios -bootstrap HOST:PORT -topic T -group G [-messages N] [-version 3.9.0]
//
// Without -version franz-go negotiates its newest versions with the broker
// (ApiVersions); with it, requests are capped at that Kafka release's versions.
package main

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

const program = "franz-scenarios"

// groupSettle bounds the wait for the broker to call rebalance_consumer_protocol's group
// Stable once its members hold their partitions (Kafka's members heartbeat every 5 s).
const groupSettle = 15 * time.Second

var codecs = []struct {
	name  string
	codec kgo.CompressionCodec
}{
	{"none", kgo.NoCompression()},
	{"gzip", kgo.GzipCompression()},
	{"snappy", kgo.SnappyCompression()},
	{"lz4", kgo.Lz4Compression()},
	{"zstd", kgo.ZstdCompression()},
}

type run struct {
	*scenario
	ctx      context.Context
	base     []kgo.Opt          // every client's options: the broker, the id, the versions
	versions *kversion.Versions // -version's, nil without it
	cl       *kgo.Client        // the admin's client, for requests kadm has no call for
	admin    *kadm.Client
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
	o := parseOptions("Kafka version to speak at most (default: franz-go's newest)")
	ctx, cancel := context.WithTimeout(context.Background(), runLimit)
	defer cancel()
	r := &run{scenario: newScenario("franz-go", o), ctx: ctx,
		base: []kgo.Opt{kgo.SeedBrokers(o.bootstrap), kgo.ClientID(program)}}
	r.Version = kgoVersion()
	if o.version != "" {
		versions := kversion.FromString(o.version)
		if versions == nil {
			fail("version", fmt.Errorf("unknown Kafka version %q", o.version))
		}
		produce, _ := versions.LookupMaxKeyVersion(int16(kmsg.Produce))
		if produce < 3 {
			fail("version", errors.New("headers need Kafka 0.11 or newer (Produce v3)"))
		}
		if produce < 7 {
			codecs = codecs[:4] // zstd needs Produce v7 (Kafka 2.1)
		}
		r.base = append(r.base, kgo.MaxVersions(versions))
		r.versions = versions
		r.Version = o.version
	}

	adminClient, err := kgo.NewClient(r.base...)
	if err != nil {
		fail("admin", err)
	}
	r.cl, r.admin = adminClient, kadm.NewClient(adminClient)

	r.do("create_topic", func() error {
		_, err := r.admin.CreateTopic(ctx, partitions, 1, map[string]*string{"retention.ms": ptr(retention)}, r.topic)
		return err
	})
	r.do("describe_configs", r.describeConfigs)
	r.do("produce", r.produce)
	r.done("headers", "timestamps", "keyed")
	r.do("consume_group", r.consumeGroup)
	r.do("committed", func() error {
		offsets, err := r.admin.FetchOffsets(ctx, r.group)
		if err == nil {
			err = offsets.Error()
		}
		r.Committed = map[int32]int64{}
		offsets.Each(func(offset kadm.OffsetResponse) { r.Committed[offset.Partition] = offset.At })
		return err
	})
	r.do("list_offsets", r.listOffsets)
	r.do("offsets_for_time", r.offsetsForTime)
	r.do("from_timestamp", r.fromTimestamp)
	r.do("from_latest", r.fromLatest)
	r.do("rebalance", r.rebalance)
	if reason, err := r.withoutConsumerProtocol(); err != nil {
		fail("rebalance_consumer_protocol", err)
	} else if reason != "" {
		r.skip("rebalance_consumer_protocol", reason)
	}
	r.do("rebalance_consumer_protocol", r.rebalanceConsumerProtocol)
	r.do("list_groups", func() error {
		groups, err := r.admin.ListGroups(ctx)
		r.Groups = groups.Groups()
		sort.Strings(r.Groups)
		return err
	})
	r.do("describe_group", func() error {
		described, err := r.admin.DescribeGroups(ctx, r.group)
		if err == nil {
			err = described.Error()
		}
		r.GroupState = described[r.group].State
		return err
	})
	r.transact(&txn{run: r, topic: r.topic + "-txn", id: r.group + "-txn"})
	r.do("delete_topic", func() error {
		_, err := r.admin.DeleteTopic(ctx, r.topic)
		return err
	})

	adminClient.Close()
	r.finish()
}

func (r *run) describeConfigs() error {
	var resource kadm.ResourceConfig
	// Kafka's metadata knows a new topic a moment after creating it.
	for attempt := 0; attempt < 100; attempt++ {
		described, err := r.admin.DescribeTopicConfigs(r.ctx, r.topic)
		if err != nil {
			return err
		}
		if resource, err = described.On(r.topic, nil); err != nil {
			return err
		}
		if !errors.Is(resource.Err, kerr.UnknownTopicOrPartition) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.TopicConfigs, r.DefaultConfig = map[string]string{}, map[string]bool{}
	for _, config := range resource.Configs {
		r.TopicConfigs[config.Key] = config.MaybeValue()
		r.DefaultConfig[config.Key] = config.Source == kmsg.ConfigSourceDefaultConfig
	}
	return resource.Err
}

// produce sends record i with codecs[i % len(codecs)], one producing client per codec;
// the keys go through kgo's default partitioner, which hashes keys with murmur2 as
// Java's client does.
func (r *run) produce() error {
	for c, codec := range codecs {
		producer, err := kgo.NewClient(append(r.base, kgo.DefaultProduceTopic(r.topic),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(codec.codec))...)
		if err != nil {
			return err
		}
		var records []*kgo.Record
		for i := c; i < r.count; i += len(codecs) {
			key := messageKey(i)
			records = append(records, &kgo.Record{
				Key:       []byte(key),
				Value:     []byte("value-" + key),
				Headers:   []kgo.RecordHeader{{Key: "origin", Value: []byte("header-" + key)}},
				Timestamp: time.UnixMilli(r.timestamp(i)),
			})
		}
		err = producer.ProduceSync(r.ctx, records...).FirstErr()
		producer.Close()
		if err != nil {
			return fmt.Errorf("with %s: %w", codec.name, err)
		}
		for _, record := range records {
			r.Produced[string(record.Key)] = record.Partition
		}
		r.Codecs = append(r.Codecs, codec.name)
	}
	r.Partitioner = "murmur2"
	return nil
}

// poll gathers consumer's records until enough says so.
func poll(ctx context.Context, consumer *kgo.Client, enough func(map[string]record) bool) (map[string]record, error) {
	records := map[string]record{}
	for !enough(records) {
		fetches := consumer.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			return records, err
		}
		fetches.EachRecord(func(got *kgo.Record) {
			headers := map[string]string{}
			for _, header := range got.Headers {
				headers[header.Key] = string(header.Value)
			}
			records[string(got.Key)] = record{string(got.Value), got.Partition, got.Offset,
				got.Timestamp.UnixMilli(), headers}
		})
	}
	return records, nil
}

func (r *run) consumeGroup() (err error) {
	consumer, err := kgo.NewClient(append(r.base, kgo.ConsumerGroup(r.group), kgo.ConsumeTopics(r.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())...)
	if err != nil {
		return err
	}
	defer consumer.Close() // leaves the group
	r.Consumed, err = poll(r.ctx, consumer, func(got map[string]record) bool { return len(got) >= r.count })
	if err != nil {
		return err
	}
	return consumer.CommitUncommittedOffsets(r.ctx)
}

func (r *run) listOffsets() error {
	for _, list := range []struct {
		into   map[int32]int64
		listed func(context.Context, ...string) (kadm.ListedOffsets, error)
	}{{r.Oldest, r.admin.ListStartOffsets}, {r.Newest, r.admin.ListEndOffsets}} {
		offsets, err := list.listed(r.ctx, r.topic)
		if err == nil {
			err = offsets.Error()
		}
		if err != nil {
			return err
		}
		offsets.Each(func(offset kadm.ListedOffset) { list.into[offset.Partition] = offset.Offset })
	}
	return nil
}

// offsetsForTime asks kadm for the first offsets at or after the time; where no message
// is that late kadm gives the end offset, which the report names -1 as Kafka does.
func (r *run) offsetsForTime() error {
	r.TimeTarget = r.timestamp(r.count / 2)
	offsets, err := r.admin.ListOffsetsAfterMilli(r.ctx, r.TimeTarget, r.topic)
	if err == nil {
		err = offsets.Error()
	}
	r.OffsetsForTime = map[int32]int64{}
	offsets.Each(func(offset kadm.ListedOffset) {
		if offset.Offset >= r.Newest[offset.Partition] {
			offset.Offset = -1
		}
		r.OffsetsForTime[offset.Partition] = offset.Offset
	})
	return err
}

// fromTimestamp reads T without a group, every partition from the time on
// (AfterMilli), until each reaches the newest offset listed.
func (r *run) fromTimestamp() error {
	consumer, err := kgo.NewClient(append(r.base, kgo.ConsumeTopics(r.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AfterMilli(r.TimeTarget)))...)
	if err != nil {
		return err
	}
	defer consumer.Close()
	records, err := poll(r.ctx, consumer, func(got map[string]record) bool {
		ended := map[int32]bool{}
		for _, record := range got {
			ended[record.Partition] = ended[record.Partition] || record.Offset == r.Newest[record.Partition]-1
		}
		for partition, offset := range r.OffsetsForTime {
			if offset >= 0 && !ended[partition] {
				return false
			}
		}
		return true
	})
	r.FromTimestamp = sortedKeys(records)
	return err
}

// fromLatest starts group G-latest with the reset at the end (it has no offsets) and
// produces late records until it reads one.
func (r *run) fromLatest() error {
	consumer, err := kgo.NewClient(append(r.base, kgo.ConsumerGroup(r.group+"-latest"),
		kgo.ConsumeTopics(r.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))...)
	if err != nil {
		return err
	}
	defer consumer.Close()
	producer, err := kgo.NewClient(append(r.base, kgo.DefaultProduceTopic(r.topic))...)
	if err != nil {
		return err
	}
	defer producer.Close()
	ctx, stop := context.WithCancel(r.ctx)
	defer stop()
	produced := make(chan error, 1)
	go func() {
		defer stop()
		for i := 0; i < lateLimit; i++ {
			key := lateKey(i)
			late := &kgo.Record{Key: []byte(key), Value: []byte("value-" + key)}
			if err := producer.ProduceSync(ctx, late).FirstErr(); err != nil {
				produced <- err
				return
			}
			select {
			case <-ctx.Done():
				produced <- nil
				return
			case <-time.After(lateEvery):
			}
		}
		produced <- fmt.Errorf("nothing read after %d late records", lateLimit)
	}()
	records, err := poll(ctx, consumer, func(got map[string]record) bool { return len(got) > 0 })
	stop()
	if late := <-produced; late != nil && !errors.Is(late, context.Canceled) {
		return late
	}
	r.FromLatest = sortedKeys(records)
	return err
}

// member is one consumer of the rebalance step; it tracks what it owns through the
// group callbacks (kgo's default balancer is cooperative-sticky: incremental changes).
type member struct {
	client *kgo.Client
	mu     sync.Mutex
	owned  map[int32]bool
}

func (m *member) change(partitions map[string][]int32, own bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ps := range partitions {
		for _, partition := range ps {
			if own {
				m.owned[partition] = true
			} else {
				delete(m.owned, partition)
			}
		}
	}
}

func (m *member) holding() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var owned []int32
	for partition := range m.owned {
		owned = append(owned, partition)
	}
	slices.Sort(owned)
	return owned
}

// rebalance runs two members of G-trio, then three, in the classic protocol.
func (r *run) rebalance() error {
	return r.members(r.group+"-trio", &r.GroupOfTwo, &r.GroupOfThree, nil)
}

// members runs the members of a rebalance step in group, each polling T in its own
// goroutine: two, then three, each settled assignment set into two and three (grow);
// settled, if given, runs while the three are still in the group. Then they leave.
func (r *run) members(group string, two, three *[][]int32, settled func([]*member) error, more ...kgo.Opt) error {
	ctx, stop := context.WithCancel(r.ctx)
	defer stop()
	var polling sync.WaitGroup
	failed := make(chan error, 3)
	members, err := grow(func() (*member, error) {
		m := &member{owned: map[int32]bool{}}
		assigned := func(_ context.Context, _ *kgo.Client, added map[string][]int32) { m.change(added, true) }
		revoked := func(_ context.Context, _ *kgo.Client, lost map[string][]int32) { m.change(lost, false) }
		opts := append(slices.Clone(r.base), kgo.ConsumerGroup(group), kgo.ConsumeTopics(r.topic),
			kgo.OnPartitionsAssigned(assigned), kgo.OnPartitionsRevoked(revoked), kgo.OnPartitionsLost(revoked))
		client, err := kgo.NewClient(append(opts, more...)...)
		if err != nil {
			return nil, err
		}
		m.client = client
		polling.Add(1)
		go func() {
			defer polling.Done()
			for ctx.Err() == nil {
				if err := client.PollFetches(ctx).Err(); err != nil && ctx.Err() == nil {
					failed <- err
					return
				}
			}
		}()
		return m, nil
	}, failed, two, three)
	if err == nil && settled != nil {
		err = settled(members)
	}
	stop()
	polling.Wait()
	for _, m := range members {
		m.client.Close() // leaves the group
	}
	return err
}

// withoutConsumerProtocol says why kgo would run rebalance_consumer_protocol's group in
// the classic protocol: it takes KIP-848 only with ConsumerGroupHeartbeat v1 (Kafka 4's)
// served by the broker and allowed by -version. "" when it would not.
func (r *run) withoutConsumerProtocol() (string, error) {
	heartbeat := int16(kmsg.ConsumerGroupHeartbeat)
	if r.versions != nil {
		if version, ok := r.versions.LookupMaxKeyVersion(heartbeat); !ok || version < 1 {
			return fmt.Sprintf("Kafka %s's versions have no ConsumerGroupHeartbeat v1 (KIP-848)", r.Version), nil
		}
	}
	brokers, err := r.admin.ApiVersions(r.ctx)
	if err != nil {
		return "", err
	}
	for _, broker := range brokers.Sorted() {
		if broker.Err != nil {
			return "", broker.Err
		}
		if version, ok := broker.KeyMaxVersion(heartbeat); !ok || version < 1 {
			return fmt.Sprintf("broker %d does not serve ConsumerGroupHeartbeat v1 (KIP-848)", broker.NodeID), nil
		}
	}
	return "", nil
}

// rebalanceConsumerProtocol is rebalance in group G-next, assigned by the broker
// (KIP-848): kgo's ServerSideBalancer with the range balancer names the broker's range
// assignor. Once the three have settled, it records what the broker says of the group.
// No commits: the members only hold partitions.
func (r *run) rebalanceConsumerProtocol() error {
	group := r.group + "-next"
	described := func(members []*member) (err error) {
		r.ConsumerProtocolGroup, err = r.describeConsumerGroup(group, members)
		return err
	}
	return r.members(group, &r.ConsumerProtocolOfTwo, &r.ConsumerProtocolOfThree, described,
		kgo.Balancers(kgo.RangeBalancer()), kgo.ServerSideBalancer(), kgo.DisableAutoCommit())
}

// describeConsumerGroup reads group's type from ListGroups (v5+) and describes it with
// ConsumerGroupDescribe, again until the broker has it Stable with every member at its
// target assignment or groupSettle has passed: what it saw last. A describe answered with
// an error (a classic group is not found) is reported, not failed.
func (r *run) describeConsumerGroup(group string, members []*member) (*describedGroup, error) {
	joined := map[string]int{}
	for i, m := range members {
		id, _ := m.client.GroupMetadata()
		joined[id] = i
	}
	listed, err := kmsg.NewPtrListGroupsRequest().RequestWith(r.ctx, r.cl)
	if err == nil {
		err = kerr.ErrorForCode(listed.ErrorCode)
	}
	if err != nil {
		return nil, fmt.Errorf("listing groups: %w", err)
	}
	seen := &describedGroup{}
	for _, listedGroup := range listed.Groups {
		if listedGroup.Group == group {
			seen.Type = listedGroup.GroupType
		}
	}
	deadline := time.Now().Add(groupSettle)
	for {
		described, err := r.admin.DescribeConsumerGroups(r.ctx, group)
		if err != nil {
			return nil, fmt.Errorf("describing %s: %w", group, err)
		}
		got := described[group]
		seen.State, seen.Assignor, seen.Epoch, seen.AssignmentEpoch = got.State, got.AssignorName, got.Epoch, got.AssignmentEpoch
		seen.Members, seen.Error = []describedMember{}, ""
		if got.Err != nil {
			seen.Error = got.Err.Error()
		}
		settled := got.Err == nil && got.State == "Stable" && len(got.Members) == len(members)
		for _, m := range got.Members {
			member, ok := joined[m.MemberID]
			if !ok {
				member = -1
			}
			d := describedMember{Member: member, Epoch: m.MemberEpoch, Type: m.MemberType,
				Assignment: partitionsOf(m.Assignment, r.topic), Target: partitionsOf(m.TargetAssignment, r.topic)}
			settled = settled && slices.Equal(d.Assignment, d.Target)
			seen.Members = append(seen.Members, d)
		}
		if settled || time.Now().After(deadline) {
			return seen, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// partitionsOf is the sorted partitions of topic in set.
func partitionsOf(set kadm.TopicsSet, topic string) []int32 {
	partitions := []int32{}
	for partition := range set[topic] {
		partitions = append(partitions, partition)
	}
	slices.Sort(partitions)
	return partitions
}

// txn does the transactions steps with kgo. The first producer is a
// GroupTransactSession, franz-go's API for consume-transform-produce: a member of group
// G-txn consuming T, whose transaction commits the offsets it polled. It starts at T's
// partition 0 (the others at their ends) and polls one record, so its first
// transaction commits the offset 1 of partition 0. The second is a plain client with
// the same transactional id.
type txn struct {
	*run
	topic, id string
	first     *kgo.GroupTransactSession
	second    *kgo.Client
}

func (t *txn) opts(more ...kgo.Opt) []kgo.Opt { return append(slices.Clone(t.base), more...) }

func (t *txn) createTopic() error {
	_, err := t.admin.CreateTopic(t.ctx, partitions, 1, nil, t.topic)
	return err
}

func txnBatch(kind string) []*kgo.Record {
	var records []*kgo.Record
	for _, key := range txnKeys(kind) {
		records = append(records, &kgo.Record{Key: []byte(key), Value: []byte("value-" + key)})
	}
	return records
}

func (t *txn) commit(offsets bool) (err error) {
	startAt := func(_ context.Context, assigned map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
		for _, ps := range assigned {
			for partition := range ps {
				ps[partition] = kgo.NewOffset().AtEnd()
				if partition == 0 {
					ps[partition] = kgo.NewOffset().At(0)
				}
			}
		}
		return assigned, nil
	}
	t.first, err = kgo.NewGroupTransactSession(t.opts(kgo.TransactionalID(t.id), kgo.DefaultProduceTopic(t.topic),
		kgo.ConsumerGroup(t.id), kgo.ConsumeTopics(t.run.topic), kgo.AdjustFetchOffsetsFn(startAt),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets())...)
	if err != nil {
		return err
	}
	if offsets {
		// What the session polls is what its transaction commits: one record.
		var polled []*kgo.Record
		for len(polled) == 0 {
			fetches := t.first.PollRecords(t.ctx, 1)
			if err := fetches.Err(); err != nil {
				return fmt.Errorf("polling %s: %w", t.run.topic, err)
			}
			polled = fetches.Records()
		}
		if got := polled[0]; got.Partition != 0 || got.Offset != 0 {
			return fmt.Errorf("polled partition %d offset %d, not partition 0 offset 0", got.Partition, got.Offset)
		}
	}
	if err := t.first.Begin(); err != nil {
		return err
	}
	if err := t.first.ProduceSync(t.ctx, txnBatch("commit")...).FirstErr(); err != nil {
		return err
	}
	committed, err := t.first.End(t.ctx, kgo.TryCommit)
	if err == nil && !committed {
		err = errors.New("the transaction aborted instead")
	}
	return err
}

func (t *txn) abort() error {
	if err := t.first.Begin(); err != nil {
		return err
	}
	if err := t.first.ProduceSync(t.ctx, txnBatch("abort")...).FirstErr(); err != nil {
		return err
	}
	_, err := t.first.End(t.ctx, kgo.TryAbort)
	return err
}

func (t *txn) fence() (fenced string, err error) {
	t.second, err = kgo.NewClient(t.opts(kgo.TransactionalID(t.id), kgo.DefaultProduceTopic(t.topic))...)
	if err != nil {
		return "", err
	}
	if _, _, err := t.second.ProducerID(t.ctx); err != nil { // InitProducerId
		return "", fmt.Errorf("second producer: %w", err)
	}
	var failed error
	if failed = t.first.Begin(); failed == nil {
		ctx, cancel := context.WithTimeout(t.ctx, 10*time.Second)
		failed = t.first.ProduceSync(ctx, txnBatch("zombie")[:1]...).FirstErr()
		committed, ended := t.first.End(ctx, kgo.TryCommit)
		cancel()
		if failed == nil {
			failed = ended
		}
		if failed == nil && committed {
			return "", errors.New("the fenced producer committed")
		}
	}
	if err := t.second.BeginTransaction(); err != nil {
		return "", fmt.Errorf("second producer: %w", err)
	}
	if err := t.second.ProduceSync(t.ctx, txnBatch("after")...).FirstErr(); err != nil {
		return "", fmt.Errorf("second producer: %w", err)
	}
	if err := t.second.EndTransaction(t.ctx, kgo.TryCommit); err != nil {
		return "", fmt.Errorf("second producer: %w", err)
	}
	return failed.Error(), nil
}

func (t *txn) close() error {
	if t.second != nil {
		t.second.Close()
	}
	t.first.Close() // leaves G-txn
	return nil
}

// transactionOffsets asks with require_stable (kadm.RequireStable): Kafka answers
// UNSTABLE_OFFSET_COMMIT until the commit's markers are written.
func (t *txn) transactionOffsets() (map[int32]int64, error) {
	deadline := time.Now().Add(txnSettle)
	for {
		fetched, err := t.admin.FetchOffsets(kadm.RequireStable(t.ctx), t.id)
		if err == nil {
			err = fetched.Error()
		}
		if errors.Is(err, kerr.UnstableOffsetCommit) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		offsets := map[int32]int64{}
		fetched.Each(func(offset kadm.OffsetResponse) {
			if offset.Topic == t.run.topic {
				offsets[offset.Partition] = offset.At
			}
		})
		return offsets, err
	}
}

// readCommitted reads T-txn from the start to the end offsets once Kafka has written
// the markers; kgo hands over the control records (KeepControlRecords), so the reader
// sees the last offset of each partition, a marker, and knows it is at the end.
func (t *txn) readCommitted() ([]string, error) {
	listed := func(list func(context.Context, ...string) (kadm.ListedOffsets, error)) func() (map[int32]int64, error) {
		return func() (map[int32]int64, error) {
			offsets, err := list(t.ctx, t.topic)
			if err == nil {
				err = offsets.Error()
			}
			ends := map[int32]int64{}
			offsets.Each(func(offset kadm.ListedOffset) { ends[offset.Partition] = offset.Offset })
			return ends, err
		}
	}
	ends, err := settled(listed(t.admin.ListCommittedOffsets), listed(t.admin.ListEndOffsets))
	if err != nil {
		return nil, err
	}
	consumer, err := kgo.NewClient(t.opts(kgo.ConsumeTopics(t.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	keys := []string{}
	reading := map[int32]bool{} // the partitions not yet read to their end
	for partition, end := range ends {
		if end > 0 {
			reading[partition] = true
		}
	}
	for len(reading) > 0 {
		fetches := consumer.PollFetches(t.ctx)
		if err := fetches.Err(); err != nil {
			return keys, err
		}
		fetches.EachRecord(func(got *kgo.Record) {
			if !got.Attrs.IsControl() {
				keys = append(keys, string(got.Key))
			}
			if got.Offset >= ends[got.Partition]-1 {
				delete(reading, got.Partition)
			}
		})
	}
	return keys, nil
}
