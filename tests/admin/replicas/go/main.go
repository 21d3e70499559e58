// franz-go's kadm (and a raw kmsg CreateTopics, as kadm has no manual assignment)
// placing, moving and electing replicas on a three-node cluster, for
// tests/admin/test_replicas_kadm.py:
//
//	replicas -bootstrap HOST:PORT,... -topic T
//
// Prints one JSON line: each step's error ("ok", or the error's text) and what kadm read
// back.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The name the shared scenario code (tests/interop/go/common) reports failures under.
const program = "replicas"

func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func main() {
	bootstrap := flag.String("bootstrap", "", "brokers")
	topic := flag.String("topic", "", "topic")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*bootstrap, ",")...), kgo.ClientID(program))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	report := map[string]any{}

	// The assignment of the report this driver reproduces: {0: [0, 1]} on three nodes.
	create := kmsg.NewPtrCreateTopicsRequest()
	created := kmsg.NewCreateTopicsRequestTopic()
	created.Topic = *topic
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
	moves.Assign(*topic, 0, []int32{2, 1})
	moved, err := admin.AlterPartitionAssignments(ctx, moves)
	if err == nil {
		err = moved.Error()
	}
	report["reassign"] = outcome(err)

	listed := map[string][][]int32{}
	ongoing, err := admin.ListPartitionReassignments(ctx, kadm.TopicsSet{*topic: {0: {}}})
	report["list"] = outcome(err)
	ongoing.Each(func(r kadm.ListPartitionReassignmentsResponse) {
		listed[fmt.Sprintf("%s-%d", r.Topic, r.Partition)] = [][]int32{
			r.Replicas, r.AddingReplicas, r.RemovingReplicas,
		}
	})
	report["listed"] = listed

	// kadm's ForbidAlterRf sends v1 with allow_replication_factor_change false.
	grow := kadm.AlterPartitionAssignmentsReq{}
	grow.Assign(*topic, 0, []int32{0, 1, 2})
	refused, err := admin.AlterPartitionAssignments(kadm.ForbidAlterRf(ctx), grow)
	if err == nil {
		err = refused.Error()
	}
	report["reassign_forbidden_rf_change"] = outcome(err)

	cancelled := kadm.AlterPartitionAssignmentsReq{}
	cancelled.CancelAssign(*topic, 0)
	undone, err := admin.AlterPartitionAssignments(ctx, cancelled)
	if err == nil {
		err = undone.Error()
	}
	report["cancel"] = outcome(err)

	elected, err := admin.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{*topic: {0: {}}})
	report["elect"] = outcome(err)
	for _, partitions := range elected {
		for partition, result := range partitions {
			report[fmt.Sprintf("elected-%d", partition)] = outcome(result.Err)
		}
	}
	line, _ := json.Marshal(report)
	fmt.Println(string(line))
}
