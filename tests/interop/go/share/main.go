// franz-go's share consumer (kgo.ShareGroup) driven line by line for
// tests/share/share_clients.py, on the line protocol of tests/interop/jvm/share/ShareDriver.java:
//
//	share -bootstrap HOST:PORT -group G -mode explicit|implicit
//
// Commands on stdin, one JSON answer line each on stdout: subscribe TOPIC, poll MILLIS,
// ack PARTITION OFFSET accept|release|reject, commit, close. franz-go accepts a polled
// record left unmarked on the next poll (implicit acknowledgement), and commit accepts the
// last poll's unmarked records in implicit mode only; in explicit mode the scenario marks
// each record itself. The test build copies tests/interop/go/common next to
// this file; this program only names itself for it.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const program = "franz-go-share"

type shareKey struct {
	partition int32
	offset    int64
}

type shareDriver struct {
	bootstrap, group string
	explicit         bool
	client           *kgo.Client
	polled           map[shareKey]*kgo.Record
	mu               sync.Mutex
	ackErrors        map[string]string
}

func main() {
	bootstrap := flag.String("bootstrap", "", "bootstrap servers")
	group := flag.String("group", "", "share group")
	mode := flag.String("mode", "implicit", "implicit or explicit acknowledgement")
	flag.Parse()
	d := &shareDriver{bootstrap: *bootstrap, group: *group, explicit: *mode == "explicit", polled: map[shareKey]*kgo.Record{}, ackErrors: map[string]string{}}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		words := strings.Fields(in.Text())
		if len(words) == 0 {
			continue
		}
		answer, err := d.run(words)
		if err != nil {
			answer = map[string]any{"error": err.Error()}
		}
		line, _ := json.Marshal(answer)
		fmt.Println(string(line))
		if words[0] == "close" {
			return
		}
	}
	d.shutdown()
}

func (d *shareDriver) run(words []string) (map[string]any, error) {
	switch words[0] {
	case "subscribe":
		client, err := kgo.NewClient(
			kgo.SeedBrokers(d.bootstrap),
			kgo.ClientID("franz-go-share"),
			kgo.ShareGroup(d.group),
			kgo.ConsumeTopics(words[1]),
			kgo.ShareMaxRecords(20),
			// At most that many records acquired per fetch, and no fetching ahead of
			// the polls: records the program has not asked for are not held.
			kgo.ShareMaxRecordsStrict(),
			kgo.ShareAckCallback(d.acked),
		)
		if err != nil {
			return nil, err
		}
		d.client = client
		return map[string]any{"ok": true}, nil
	case "poll":
		millis, err := strconv.Atoi(words[1])
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(millis)*time.Millisecond)
		defer cancel()
		fetches := d.client.PollFetches(ctx)
		records := [][]any{}
		d.polled = map[shareKey]*kgo.Record{}
		var failure error
		fetches.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				failure = err
			}
		})
		if failure != nil {
			return nil, failure
		}
		fetches.EachRecord(func(r *kgo.Record) {
			d.polled[shareKey{r.Partition, r.Offset}] = r
			records = append(records, []any{r.Partition, r.Offset, string(r.Value), r.DeliveryCount()})
		})
		return map[string]any{"records": records}, nil
	case "ack":
		partition, _ := strconv.Atoi(words[1])
		offset, _ := strconv.ParseInt(words[2], 10, 64)
		record, ok := d.polled[shareKey{int32(partition), offset}]
		if !ok {
			return nil, fmt.Errorf("offset %d of partition %d was not in the last poll", offset, partition)
		}
		status := map[string]kgo.AckStatus{"accept": kgo.AckAccept, "release": kgo.AckRelease, "reject": kgo.AckReject}[words[3]]
		d.client.MarkAcks(status, record)
		return map[string]any{"ok": true}, nil
	case "commit":
		if !d.explicit {
			// As commitSync does in implicit mode: the last poll's unmarked records are accepted.
			d.client.MarkAcks(kgo.AckAccept)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := d.client.FlushAcks(ctx); err != nil {
			return nil, err
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		errs := d.ackErrors
		d.ackErrors = map[string]string{}
		return map[string]any{"errors": errs}, nil
	case "close":
		d.shutdown()
		return map[string]any{"ok": true}, nil
	}
	return nil, fmt.Errorf("unknown command %s", words[0])
}

func (d *shareDriver) acked(_ *kgo.Client, results kgo.ShareAckResults) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, result := range results {
		if result.Err != nil {
			d.ackErrors[strconv.Itoa(int(result.Partition))] = result.Err.Error()
		}
	}
}

func (d *shareDriver) shutdown() {
	if d.client != nil {
		d.client.Close()
		d.client = nil
	}
}
