// Client quotas through franz-go's kadm: set, described by filter, refused, removed.
// Prints the same lines as ../QuotaAdmin.java; tests/admin/test_quotas_clients.py checks
// them. Usage: quotas <bootstrap> <user> <client-id>
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	if err := run(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(bootstrap, user, clientID string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	alone := kadm.ClientQuotaEntity{{Type: "user", Name: &user}}
	pair := kadm.ClientQuotaEntity{{Type: "user", Name: &user}, {Type: "client-id", Name: &clientID}}
	ofUser := []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: &user, MatchType: 0}}

	alter := func(validate bool, entries ...kadm.AlterClientQuotaEntry) error {
		var results kadm.AlteredClientQuotas
		var err error
		if validate {
			results, err = adm.ValidateAlterClientQuotas(ctx, entries)
		} else {
			results, err = adm.AlterClientQuotas(ctx, entries)
		}
		if err != nil {
			return err
		}
		for _, result := range results {
			if result.Err != nil {
				return result.Err
			}
		}
		return nil
	}

	if err := alter(false,
		kadm.AlterClientQuotaEntry{Entity: alone, Ops: []kadm.AlterClientQuotaOp{
			{Key: "consumer_byte_rate", Value: 2097152}, {Key: "request_percentage", Value: 150.5}}},
		kadm.AlterClientQuotaEntry{Entity: pair, Ops: []kadm.AlterClientQuotaOp{
			{Key: "producer_byte_rate", Value: 1048576}}},
	); err != nil {
		return err
	}
	if err := show(ctx, adm, "set", false, ofUser, 2); err != nil {
		return err
	}

	if err := alter(true, kadm.AlterClientQuotaEntry{Entity: alone, Ops: []kadm.AlterClientQuotaOp{
		{Key: "producer_byte_rate", Value: 5}}}); err != nil {
		return err
	}
	if err := show(ctx, adm, "validated", true, ofUser, 1); err != nil {
		return err
	}

	for _, key := range []string{"no_such_quota", "producer_byte_rate"} {
		value := 1.0
		if key == "producer_byte_rate" {
			value = -1
		}
		err := alter(false, kadm.AlterClientQuotaEntry{Entity: alone, Ops: []kadm.AlterClientQuotaOp{
			{Key: key, Value: value}}})
		refusal := "none"
		if errors.Is(err, kerr.InvalidRequest) {
			refusal = "InvalidRequestException"
		} else if err != nil {
			refusal = err.Error()
		}
		fmt.Printf("refused %s %s\n", key, refusal)
	}

	if err := alter(false,
		kadm.AlterClientQuotaEntry{Entity: alone, Ops: []kadm.AlterClientQuotaOp{
			{Key: "consumer_byte_rate", Remove: true}, {Key: "request_percentage", Remove: true}}},
		kadm.AlterClientQuotaEntry{Entity: pair, Ops: []kadm.AlterClientQuotaOp{
			{Key: "producer_byte_rate", Remove: true}}},
	); err != nil {
		return err
	}
	return show(ctx, adm, "removed", false, ofUser, 0)
}

// show prints what the filter finds once there are `expected` entities (Kafka applies an
// alteration a moment after answering it), one sorted line per entity.
func show(ctx context.Context, adm *kadm.Client, step string, strict bool, filter []kadm.DescribeClientQuotaComponent, expected int) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		found, err := adm.DescribeClientQuotas(ctx, strict, filter)
		if err != nil {
			return err
		}
		if len(found) == expected || time.Now().After(deadline) {
			var lines []string
			for _, quota := range found {
				var names, values []string
				for _, component := range quota.Entity {
					name := "null"
					if component.Name != nil {
						name = *component.Name
					}
					names = append(names, component.Type+"="+name)
				}
				for _, value := range quota.Values {
					text := strconv.FormatFloat(value.Value, 'f', -1, 64)
					if !strings.Contains(text, ".") {
						text += ".0" // as Java prints a double
					}
					values = append(values, value.Key+"="+text)
				}
				sort.Strings(names)
				sort.Strings(values)
				lines = append(lines, "{"+strings.Join(names, ", ")+"} {"+strings.Join(values, ", ")+"}")
			}
			sort.Strings(lines)
			fmt.Printf("%s %d\n", step, len(lines))
			for _, line := range lines {
				fmt.Printf("%s %s\n", step, line)
			}
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}
