// franz-go's kadm for the authorized-operations and per-broker config scenarios of
// tests/admin/test_authops_go.py. Arguments: the bootstrap servers, then steps, each
// printing one JSON line:
//
//	topic:TOPIC           Metadata with authorized operations of the topic
//	group:GROUP           DescribeGroups (classic), which always asks for them
//	consumer:GROUP        ConsumerGroupDescribe (Kafka 4's consumer protocol)
//	share:GROUP           ShareGroupDescribe
//	set:NODE:NAME:VALUE   IncrementalAlterConfigs SET on broker NODE ("" cluster-wide)
//	describe:NODE:NAME    DescribeConfigs of broker NODE ("" cluster-wide): one config
//
// The build copies tests/interop/go/common next to this file; this program only names
// itself for it.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const program = "franz-go-authops"

func operationNames(operations []kadm.ACLOperation) []string {
	names := []string{}
	for _, operation := range operations {
		names = append(names, operation.String())
	}
	sort.Strings(names)
	return names
}

func brokers(node string) []int32 {
	if node == "" {
		return nil
	}
	id, err := strconv.Atoi(node)
	if err != nil {
		panic(err)
	}
	return []int32{int32(id)}
}

func runStep(ctx context.Context, admin *kadm.Client, step []string, line map[string]any) error {
	switch step[0] {
	case "topic":
		metadata, err := admin.Metadata(kadm.WithAuthorizedOps(ctx), step[1])
		if err != nil {
			return err
		}
		line["operations"] = operationNames(metadata.Topics[step[1]].AuthorizedOperations)
	case "group":
		described, err := admin.DescribeGroups(ctx, step[1])
		if err != nil {
			return err
		}
		line["operations"] = operationNames(described[step[1]].AuthorizedOperations)
	case "consumer":
		described, err := admin.DescribeConsumerGroups(ctx, step[1])
		if err != nil {
			return err
		}
		line["operations"] = operationNames(described[step[1]].AuthorizedOperations)
	case "share":
		described, err := admin.DescribeShareGroups(ctx, step[1])
		if err != nil {
			return err
		}
		line["operations"] = operationNames(described[step[1]].AuthorizedOperations)
	case "set":
		value := step[3]
		change := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: step[2], Value: &value}}
		answers, err := admin.AlterBrokerConfigs(ctx, change, brokers(step[1])...)
		if err != nil {
			return err
		}
		for _, answer := range answers {
			if answer.Err != nil {
				return fmt.Errorf("%v: %s", answer.Err, answer.ErrMessage)
			}
		}
	case "describe":
		described, err := admin.DescribeBrokerConfigs(ctx, brokers(step[1])...)
		if err != nil {
			return err
		}
		for _, config := range described[0].Configs {
			if config.Key != step[2] {
				continue
			}
			line["value"] = config.Value
			line["source"] = config.Source.String()
			synonyms := [][]any{}
			for _, synonym := range config.Synonyms {
				synonyms = append(synonyms, []any{synonym.Key, synonym.Value, synonym.Source.String()})
			}
			line["synonyms"] = synonyms
		}
	default:
		return fmt.Errorf("unknown step %q", step[0])
	}
	return nil
}

func main() {
	client, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(os.Args[1], ",")...))
	if err != nil {
		fail("connect", err)
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	for _, arg := range os.Args[2:] {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		line := map[string]any{"step": arg}
		if err := runStep(ctx, admin, strings.Split(arg, ":"), line); err != nil {
			line["error"] = err.Error()
		}
		cancel()
		encoded, _ := json.Marshal(line)
		fmt.Println(string(encoded))
	}
}
