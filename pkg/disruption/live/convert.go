package live

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/disruption"
	"github.com/karpfunc/karpfunc/pkg/messages"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

// A command travels in two forms besides disruption.Command: the
// validation message (messages.DisruptionCommand) and the record on its
// replacements (Record). Every conversion between them is here.

// CommandID identifies a command by its method and candidates.
func CommandID(method string, candidates []types.UID) string {
	ids := make([]string, len(candidates))
	for i, u := range candidates {
		ids[i] = string(u)
	}
	sort.Strings(ids)
	sum := sha256.Sum256([]byte(method + "\x00" + strings.Join(ids, ",")))
	return hex.EncodeToString(sum[:])[:16]
}

func commandID(cmd *disruption.Command) string {
	uids := make([]types.UID, len(cmd.Candidates))
	for i, cand := range cmd.Candidates {
		uids[i] = cand.NodeClaim.UID
	}
	return CommandID(cmd.Method, uids)
}

// recordOf is the record cmd's replacements carry.
func recordOf(cmd *disruption.Command) Record {
	rec := Record{ID: commandID(cmd), Method: cmd.Method, Reason: string(cmd.Reason), Replacements: len(cmd.Replacements)}
	for _, cand := range cmd.Candidates {
		rec.Candidates = append(rec.Candidates, CandidateRef{Name: cand.Name(), UID: cand.NodeClaim.UID})
	}
	return rec
}

// validationMessage is cmd, decided at now, as its validation message.
func validationMessage(cluster string, cmd *disruption.Command, now time.Time) messages.DisruptionCommand {
	msg := messages.DisruptionCommand{Cluster: cluster, Method: cmd.Method, Reason: string(cmd.Reason), DecidedAt: now.UTC(),
		SavingsPerHour: cmd.Savings}
	for _, cand := range cmd.Candidates {
		msg.Candidates = append(msg.Candidates, messages.ObjectRef{Name: cand.Name(), UID: string(cand.NodeClaim.UID)})
	}
	for _, plan := range cmd.Replacements {
		names := make([]string, 0, len(plan.InstanceTypes))
		for _, it := range plan.InstanceTypes {
			names = append(names, it.Name)
		}
		msg.Replacements = append(msg.Replacements, names)
	}
	return msg
}

// commandFromMessage is the command a validation message describes, to be
// validated: candidates by name and UID only, replacements with the
// instance types the catalog still knows.
func (c *Controller) commandFromMessage(msg messages.DisruptionCommand) *disruption.Command {
	cmd := &disruption.Command{Method: msg.Method, Reason: disruption.Reason(msg.Reason), Savings: msg.SavingsPerHour}
	for _, ref := range msg.Candidates {
		claim := &karpv1.NodeClaim{}
		claim.Name = ref.Name
		claim.UID = types.UID(ref.UID)
		cmd.Candidates = append(cmd.Candidates, &disruption.Candidate{NodeClaim: claim})
	}
	for _, names := range msg.Replacements {
		plan := &scheduler.NodeClaimPlan{}
		for _, name := range names {
			if it, ok := c.catalogType(name); ok {
				plan.InstanceTypes = append(plan.InstanceTypes, it)
			}
		}
		cmd.Replacements = append(cmd.Replacements, plan)
	}
	return cmd
}

// messageCandidates are the NodeClaims of snap a validation message names
// (name and UID).
func messageCandidates(snap *snapshot.Cluster, msg messages.DisruptionCommand) []*karpv1.NodeClaim {
	var candidates []*karpv1.NodeClaim
	for _, ref := range msg.Candidates {
		for _, nc := range snap.NodeClaims {
			if nc.Name == ref.Name && string(nc.UID) == ref.UID {
				candidates = append(candidates, nc)
			}
		}
	}
	return candidates
}
