// franz-go's kadm for the admin scenario catalogue of tests/admin (tests/admin/drivers.py
// builds and runs it). Arguments: the bootstrap servers, then named steps, run in order
// on one client:
//
//	topic:TOPIC           Metadata with authorized operations of the topic
//	group:GROUP           DescribeGroups (classic), which always asks for them
//	consumer:GROUP        ConsumerGroupDescribe (Kafka 4's consumer protocol)
//	share:GROUP           ShareGroupDescribe
//	set:NODE:NAME:VALUE   IncrementalAlterConfigs SET on broker NODE ("" cluster-wide)
//	describe:NODE:NAME    DescribeConfigs of broker NODE ("" cluster-wide): one config
//	quotas:USER:CLIENT    client quotas set, described, refused and removed (text lines)
//	replicas:TOPIC        a partition placed by hand, moved, listed, cancelled, elected
//	signin:TOPIC:TOKEN    a client of its own signs in with SASL/OAUTHBEARER and the
//	                      token given, creates TOPIC and produces one record to it
//
// Each step but quotas prints one JSON line. The build copies tests/interop/go/common
// next to this file; this program only names itself for it.
package main

import (
	"context"
	"encoding/json"
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
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

const program = "admin"

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

// putOperations puts the operations the answer read into the line, unless it failed.
func putOperations(line map[string]any, err error, operations func() []kadm.ACLOperation) error {
	if err != nil {
		return err
	}
	line["operations"] = operationNames(operations())
	return nil
}

func runStep(ctx context.Context, admin *kadm.Client, step []string, line map[string]any) error {
	switch step[0] {
	case "topic":
		metadata, err := admin.Metadata(kadm.WithAuthorizedOps(ctx), step[1])
		return putOperations(line, err, func() []kadm.ACLOperation {
			return metadata.Topics[step[1]].AuthorizedOperations
		})
	case "group":
		described, err := admin.DescribeGroups(ctx, step[1])
		return putOperations(line, err, func() []kadm.ACLOperation {
			return described[step[1]].AuthorizedOperations
		})
	case "consumer":
		described, err := admin.DescribeConsumerGroups(ctx, step[1])
		return putOperations(line, err, func() []kadm.ACLOperation {
			return described[step[1]].AuthorizedOperations
		})
	case "share":
		described, err := admin.DescribeShareGroups(ctx, step[1])
		return putOperations(line, err, func() []kadm.ACLOperation {
			return described[step[1]].AuthorizedOperations
		})
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
	client, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(os.Args[1], ",")...), kgo.ClientID(program))
	if err != nil {
		fail("connect", err)
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	for _, arg := range os.Args[2:] {
		step := strings.Split(arg, ":")
		switch step[0] {
		case "quotas":
			if err := quotas(admin, step[1], step[2]); err != nil {
				fail(arg, err)
			}
		case "replicas":
			emit(replicas(client, admin, step[1]))
		case "signin":
			emit(signIn(os.Args[1], arg, step[1], step[2]))
		default:
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			line := map[string]any{"step": arg}
			if err := runStep(ctx, admin, step, line); err != nil {
				line["error"] = err.Error()
			}
			cancel()
			emit(line)
		}
	}
}

// signIn signs in with OAUTHBEARER on a client of its own, creates the topic and
// produces one record to it: "value" says it did, "error" why not.
func signIn(bootstrap, arg, topic, token string) map[string]any {
	line := map[string]any{"step": arg}
	client, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(bootstrap, ",")...),
		kgo.ClientID(program),
		kgo.SASL(oauth.Auth{Token: token}.AsMechanism()),
		kgo.AllowAutoTopicCreation(),
	)
	if err != nil {
		line["error"] = err.Error()
		return line
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	created, err := kadm.NewClient(client).CreateTopic(ctx, 1, 1, nil, topic)
	if err == nil {
		err = created.Err
	}
	if err == nil {
		err = client.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("signed-in")}).FirstErr()
	}
	if err != nil {
		line["error"] = err.Error()
		return line
	}
	line["value"] = "signed-in"
	return line
}

func emit(line map[string]any) {
	encoded, _ := json.Marshal(line)
	fmt.Println(string(encoded))
}

// quotas sets, describes by filter, validates, has refused and removes client quotas,
// printing the same lines as AdminScenarios.java.
func quotas(adm *kadm.Client, user, clientID string) error {
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

func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// replicas places a partition by hand with a raw CreateTopics (kadm has no manual
// assignment), moves it, lists and cancels the move and elects the preferred leader:
// each step's error ("ok", or the error's text) and what kadm read back.
func replicas(client *kgo.Client, admin *kadm.Client, topic string) map[string]any {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	report := map[string]any{}

	// The assignment of the report this driver reproduces: {0: [0, 1]} on three nodes.
	create := kmsg.NewPtrCreateTopicsRequest()
	created := kmsg.NewCreateTopicsRequestTopic()
	created.Topic = topic
	created.NumPartitions = -1
	created.ReplicationFactor = -1
	assignment := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	assignment.Partition = 0
	assignment.Replicas = []int32{0, 1}
	created.ReplicaAssignment = append(created.ReplicaAssignment, assignment)
	create.Topics = append(create.Topics, created)
	createErr := error(nil)
	if answer, err := create.RequestWith(ctx, client); err != nil {
		createErr = err
	} else {
		createErr = kerr.ErrorForCode(answer.Topics[0].ErrorCode)
	}
	report["create"] = outcome(createErr)

	moves := kadm.AlterPartitionAssignmentsReq{}
	moves.Assign(topic, 0, []int32{2, 1})
	moved, err := admin.AlterPartitionAssignments(ctx, moves)
	if err == nil {
		err = moved.Error()
	}
	report["reassign"] = outcome(err)

	listed := map[string][][]int32{}
	ongoing, err := admin.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}}})
	report["list"] = outcome(err)
	ongoing.Each(func(r kadm.ListPartitionReassignmentsResponse) {
		listed[fmt.Sprintf("%s-%d", r.Topic, r.Partition)] = [][]int32{
			r.Replicas, r.AddingReplicas, r.RemovingReplicas,
		}
	})
	report["listed"] = listed

	// kadm's ForbidAlterRf sends v1 with allow_replication_factor_change false.
	grow := kadm.AlterPartitionAssignmentsReq{}
	grow.Assign(topic, 0, []int32{0, 1, 2})
	refused, err := admin.AlterPartitionAssignments(kadm.ForbidAlterRf(ctx), grow)
	if err == nil {
		err = refused.Error()
	}
	report["reassign_forbidden_rf_change"] = outcome(err)

	cancelled := kadm.AlterPartitionAssignmentsReq{}
	cancelled.CancelAssign(topic, 0)
	undone, err := admin.AlterPartitionAssignments(ctx, cancelled)
	if err == nil {
		err = undone.Error()
	}
	report["cancel"] = outcome(err)

	elected, err := admin.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}}})
	report["elect"] = outcome(err)
	for _, partitions := range elected {
		for partition, result := range partitions {
			report[fmt.Sprintf("elected-%d", partition)] = outcome(result.Err)
		}
	}
	return report
}
