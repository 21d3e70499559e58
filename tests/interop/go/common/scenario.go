// What the Go drivers of tests/interop/test_client_matrix.py share: the command line,
// the report of tests/interop/SCENARIOS.md, the bookkeeping of its steps, the watchdog
// and the settling of the rebalance step. The test's build copies this file next to
// each driver's main.go, which names the program (`program`) and does the steps with its
// client's APIs.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync/atomic"
	"time"
)

const (
	partitions = 3
	retention  = "3600000"
	runLimit   = 60 * time.Second
	lateEvery  = 200 * time.Millisecond
	lateLimit  = 100
	txnRecords = 5                // records each transaction of the transactions step sends
	txnSettle  = 15 * time.Second // for Kafka to finish a transaction it has answered
)

type record struct {
	Value     string            `json:"value"`
	Partition int32             `json:"partition"`
	Offset    int64             `json:"offset"`
	Timestamp int64             `json:"timestamp"`
	Headers   map[string]string `json:"headers"`
}

// The configs are left out when describe_configs is skipped.
type report struct {
	Client         string            `json:"client"`
	Version        string            `json:"version"`
	Steps          []string          `json:"steps"`
	Skipped        map[string]string `json:"skipped"`
	TopicConfigs   map[string]string `json:"topic_configs,omitempty"`
	DefaultConfig  map[string]bool   `json:"default_config,omitempty"`
	Produced       map[string]int32  `json:"produced"` // key -> partition
	Codecs         []string          `json:"codecs"`
	Partitioner    string            `json:"partitioner"`
	BaseTimestamp  int64             `json:"base_timestamp"`
	Consumed       map[string]record `json:"consumed"`
	Committed      map[int32]int64   `json:"committed"`
	Oldest         map[int32]int64   `json:"oldest"`
	Newest         map[int32]int64   `json:"newest"`
	TimeTarget     int64             `json:"time_target"`
	OffsetsForTime map[int32]int64   `json:"offsets_for_time"`
	FromTimestamp  []string          `json:"from_timestamp"`
	FromLatest     []string          `json:"from_latest"`
	GroupOfTwo     [][]int32         `json:"group_of_two"`
	GroupOfThree   [][]int32         `json:"group_of_three"`
	Groups         []string          `json:"groups"`
	GroupState     string            `json:"group_state"`
	// Left out when rebalance_consumer_protocol is skipped.
	ConsumerProtocolOfTwo   [][]int32       `json:"consumer_protocol_of_two,omitempty"`
	ConsumerProtocolOfThree [][]int32       `json:"consumer_protocol_of_three,omitempty"`
	ConsumerProtocolGroup   *describedGroup `json:"consumer_protocol_group,omitempty"`
	// Left out when the transactions steps are skipped.
	ReadCommitted      []string        `json:"read_committed,omitempty"`
	TransactionOffsets map[int32]int64 `json:"transaction_offsets,omitempty"`
	Fenced             string          `json:"fenced,omitempty"`
}

// describedGroup is what the broker says of rebalance_consumer_protocol's group once its
// three members have settled: ListGroups' group type and ConsumerGroupDescribe's answer.
type describedGroup struct {
	Type            string            `json:"type"`
	State           string            `json:"state"`
	Assignor        string            `json:"assignor"`
	Epoch           int32             `json:"epoch"`
	AssignmentEpoch int32             `json:"assignment_epoch"`
	Members         []describedMember `json:"members"`
	Error           string            `json:"error,omitempty"` // the describe's, if it failed
}

// describedMember is one member as ConsumerGroupDescribe gives it; Member is the index
// of the step's member with its member id (the order they joined in), -1 if none.
type describedMember struct {
	Member     int     `json:"member"`
	Epoch      int32   `json:"epoch"`
	Type       int8    `json:"type"` // 1: consumer protocol, 0: classic, -1: not told (v0)
	Assignment []int32 `json:"assignment"`
	Target     []int32 `json:"target"`
}

// options is the command line; -version means what each driver makes of it.
type options struct {
	bootstrap, topic, group, version string
	count                            int
}

func parseOptions(versionUsage string) options {
	var o options
	flag.StringVar(&o.bootstrap, "bootstrap", "", "broker address")
	flag.StringVar(&o.topic, "topic", "", "topic to create and use")
	flag.StringVar(&o.group, "group", "", "consumer group id")
	flag.IntVar(&o.count, "messages", 30, "messages to produce")
	flag.StringVar(&o.version, "version", "", versionUsage)
	flag.Parse()
	return o
}

// scenario is one run's report and bookkeeping; each driver's run embeds it.
type scenario struct {
	report
	topic, group string
	count        int
	current      atomic.Value // the step under way, for the watchdog
}

// newScenario starts the run's report and its watchdog: a hung client fails, never hangs.
func newScenario(client string, o options) *scenario {
	s := &scenario{topic: o.topic, group: o.group, count: o.count}
	s.report = report{
		Client: client, Steps: []string{}, Skipped: map[string]string{},
		Produced: map[string]int32{}, Codecs: []string{},
		Oldest: map[int32]int64{}, Newest: map[int32]int64{},
		// A second-rounded wall clock a little in the past: within any retention.
		BaseTimestamp: (time.Now().Unix() - int64(o.count) - 60) * 1000,
	}
	s.current.Store("start")
	time.AfterFunc(runLimit, func() {
		fail(s.current.Load().(string), fmt.Errorf("not finished within %s", runLimit))
	})
	return s
}

func fail(step string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %s: %v\n", program, step, err)
	os.Exit(1)
}

func (s *scenario) skip(step, reason string) { s.Skipped[step] = reason }

func (s *scenario) skipped(step string) bool {
	_, skipped := s.Skipped[step]
	return skipped
}

// do runs step unless it is skipped; a failure ends the run naming the step.
func (s *scenario) do(step string, action func() error) {
	if s.skipped(step) {
		return
	}
	s.current.Store(step)
	if err := action(); err != nil {
		fail(step, err)
	}
	s.Steps = append(s.Steps, step)
}

// done names steps carried out by another (headers, timestamps and keys by produce).
func (s *scenario) done(steps ...string) {
	for _, step := range steps {
		s.do(step, func() error { return nil })
	}
}

// finish prints the report as the last line of standard output.
func (s *scenario) finish() {
	encoded, err := json.Marshal(s.report)
	if err != nil {
		fail("report", err)
	}
	fmt.Println(string(encoded))
}

func messageKey(i int) string { return fmt.Sprintf("key-%03d", i) }

func lateKey(i int) string { return fmt.Sprintf("late-%03d", i) }

func (s *scenario) timestamp(i int) int64 { return s.BaseTimestamp + 1000*int64(i) }

func sortedKeys(records map[string]record) []string {
	keys := make([]string, 0, len(records))
	for key := range records {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return keys
}

// holder is a member of the rebalance step: what it holds of T right now.
type holder interface{ holding() []int32 }

// grow adds members (join) until two, then three, hold T's partitions, setting two and
// three to each settled assignment; it returns the members joined, on failure too.
func grow[M holder](join func() (M, error), failed <-chan error, two, three *[][]int32) ([]M, error) {
	var members []M
	for _, size := range []int{2, 3} {
		for len(members) < size {
			m, err := join()
			if err != nil {
				return members, err
			}
			members = append(members, m)
		}
		held, err := settle(members, failed)
		if err != nil {
			return members, fmt.Errorf("group of %d: %w", size, err)
		}
		if size == 2 {
			*two = held
		} else {
			*three = held
		}
	}
	return members, nil
}

// settle waits until every member holds partitions, none held twice, all held.
func settle[M holder](members []M, failed <-chan error) ([][]int32, error) {
	for {
		held, seen := make([][]int32, len(members)), map[int32]bool{}
		covered := true
		for i, m := range members {
			held[i] = m.holding()
			covered = covered && len(held[i]) > 0
			for _, partition := range held[i] {
				covered = covered && !seen[partition]
				seen[partition] = true
			}
		}
		if covered && len(seen) == partitions {
			return held, nil
		}
		select {
		case err := <-failed:
			return nil, err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func ptr[T any](value T) *T { return &value }

// txnKey is record i of a transaction of the transactions step: kind is commit, abort,
// zombie or after.
func txnKey(kind string, i int) string { return fmt.Sprintf("txn-%s-%03d", kind, i) }

func txnKeys(kind string) []string {
	keys := make([]string, txnRecords)
	for i := range keys {
		keys[i] = txnKey(kind, i)
	}
	return keys
}

// transactor does the steps transactions, transaction_offsets and fencing with one
// client's APIs: T-txn and the transactional id (and group) G-txn are its own.
type transactor interface {
	// createTopic creates T-txn with 3 partitions.
	createTopic() error
	// commit: the first producer commits a transaction of the txn-commit keys, with
	// the offset 1 of T's partition 0 for group G-txn when offsets.
	commit(offsets bool) error
	// abort: the first producer sends the txn-abort keys in a transaction, waits until
	// they are acknowledged and aborts it.
	abort() error
	// fence: a second producer initialises the transactional id; the first's
	// transaction of txn-zombie-000 fails (its error, as text); the second commits
	// a transaction of the txn-after keys.
	fence() (string, error)
	// transactionOffsets reads G-txn's committed offsets of T.
	transactionOffsets() (map[int32]int64, error)
	// readCommitted reads T-txn with read_committed and no group from the earliest
	// offsets to the end offsets; the keys read.
	readCommitted() ([]string, error)
	// close closes the producers.
	close() error
}

// transact runs the transactions steps in the catalogue's order: the read of
// transactions comes after fencing.
func (s *scenario) transact(t transactor) {
	if s.skipped("transactions") {
		return
	}
	part := func(step string, action func() error) {
		s.current.Store(step)
		if err := action(); err != nil {
			fail(step, err)
		}
	}
	part("transactions", t.createTopic)
	part("transactions", func() error { return t.commit(!s.skipped("transaction_offsets")) })
	part("transactions", t.abort)
	if !s.skipped("fencing") {
		part("fencing", func() (err error) {
			s.Fenced, err = t.fence()
			if err == nil && s.Fenced == "" {
				err = errors.New("the fenced producer's transaction did not fail")
			}
			return err
		})
	}
	part("transactions", t.close)
	part("transactions", func() (err error) {
		s.ReadCommitted, err = t.readCommitted()
		sort.Strings(s.ReadCommitted)
		return err
	})
	s.Steps = append(s.Steps, "transactions")
	s.do("transaction_offsets", func() (err error) {
		s.TransactionOffsets, err = t.transactionOffsets()
		return err
	})
	s.done("fencing")
}

// settled waits until Kafka has written the markers of the transactions it answered:
// until the read_committed end offsets (lso) are the high watermarks (hwm); it returns
// those end offsets.
func settled(lso, hwm func() (map[int32]int64, error)) (map[int32]int64, error) {
	deadline := time.Now().Add(txnSettle)
	for {
		stable, err := lso()
		if err != nil {
			return nil, err
		}
		high, err := hwm()
		if err != nil {
			return nil, err
		}
		same := len(stable) == partitions && len(high) == partitions
		for partition, offset := range high {
			same = same && stable[partition] == offset
		}
		if same {
			return stable, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("read_committed end offsets %v, high watermarks %v after %s", stable, high, txnSettle)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
