package live

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis"
	"github.com/karpfunc/karpfunc/pkg/disruption"
	"github.com/karpfunc/karpfunc/pkg/messages"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// A command's life: decided by a pass, validated ValidationDelay later
// (Validate; drift skips this), executed (replacements launched), finished
// by the first pass that sees every replacement Initialized (resume), or
// abandoned when a replacement is gone.

// Validate re-checks a command decided ValidationDelay ago and carries it
// out if it still holds.
func (c *Controller) Validate(ctx context.Context, msg messages.DisruptionCommand) (Result, error) {
	res := Result{Refused: map[string]int{}}
	snap, err := snapshot.List(ctx, c.kube)
	if err != nil {
		return res, err
	}
	// Whatever the outcome, the command no longer holds others back.
	if err := c.markValidating(ctx, messageCandidates(snap, msg), time.Time{}); err != nil {
		return res, err
	}
	now := c.clock.Now()
	if inFlight := inFlight(snap); inFlight != "" {
		res.Invalid = "command " + inFlight + " is still waiting for its replacements"
		res.InFlight = inFlight
		return res, nil
	}
	st, _, err := c.state(ctx, snap, now, false)
	if err != nil {
		return res, err
	}
	fresh, err := disruption.Validate(st, c.commandFromMessage(msg))
	var verr *disruption.ValidationError
	if errors.As(err, &verr) {
		res.Invalid = verr.Reason
		// No pass is scheduled for it: what changed the answer was an
		// event, which asks for its own pass (a re-decision here could
		// loop at idle between two views of the same cluster).
		c.log.Info("disruption command abandoned after validation", "method", msg.Method, "reason", msg.Reason, "why", verr.Reason)
		return res, nil
	}
	if err != nil {
		return res, err
	}
	res.Decided = fresh.String()
	executed, err := c.execute(ctx, snap, fresh)
	res.Replacing = executed.Replacing
	res.Disrupted = executed.Disrupted
	res.Outcome = executed.Outcome
	if err != nil {
		return res, err
	}
	res.Outcome.Then(triggers.DisruptionPass(c.opts.ClusterName, "executed", c.afterExecute(now, executed)))
	return res, nil
}

// askValidation adds cmd's validation message, due ValidationDelay from
// now, to out and marks its candidates as awaiting it.
func (c *Controller) askValidation(ctx context.Context, cmd *disruption.Command, now time.Time, out *triggers.Outcome) (time.Time, error) {
	// One validation per command per slot: two passes that decide the
	// same command collapse into one (the constructor's message ID).
	validation := triggers.DisruptionValidate(validationMessage(c.opts.ClusterName, cmd, now), commandID(cmd), now, c.opts.ValidationDelay)
	at := validation.Due()
	out.Then(validation)
	candidates := make([]*karpv1.NodeClaim, len(cmd.Candidates))
	for i, cand := range cmd.Candidates {
		candidates[i] = cand.NodeClaim
	}
	return at, c.markValidating(ctx, candidates, at)
}

// markValidating marks the candidates as awaiting a validation due at, or
// removes the mark when at is zero.
func (c *Controller) markValidating(ctx context.Context, candidates []*karpv1.NodeClaim, at time.Time) error {
	mark := encodeValidating(at)
	var errs []error
	for _, nc := range candidates {
		if nc.Annotations[apis.AnnotationDisruptionValidating] == mark {
			continue
		}
		patch := client.MergeFrom(nc)
		marked := nc.DeepCopy() // nc is the snapshot's
		if mark == "" {
			delete(marked.Annotations, apis.AnnotationDisruptionValidating)
		} else {
			if marked.Annotations == nil {
				marked.Annotations = map[string]string{}
			}
			marked.Annotations[apis.AnnotationDisruptionValidating] = mark
		}
		if err := c.kube.Patch(ctx, marked, patch); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("marking NodeClaim %s as awaiting validation: %w", nc.Name, err))
		}
	}
	return errors.Join(errs...)
}

// validating names a command awaiting its validation: a NodeClaim marked
// with a due time less than validationGrace ago.
func validating(snap *snapshot.Cluster, now time.Time) string {
	for _, nc := range snap.NodeClaims {
		at, ok := decodeValidating(nc.Annotations)
		if !ok || nc.DeletionTimestamp != nil || !now.Before(at.Add(validationGrace)) {
			continue
		}
		return fmt.Sprintf("validation of %s at %s", nc.Name, at.Format(time.RFC3339))
	}
	return ""
}

// inFlight names a command whose replacements are on their way.
func inFlight(snap *snapshot.Cluster) string {
	for _, nc := range snap.NodeClaims {
		if id := commandOf(nc.Annotations); id != "" && nc.DeletionTimestamp == nil {
			return id
		}
	}
	return ""
}

// resume finishes commands whose replacements are all Initialized:
// taint and delete the candidates, then drop the records. A command with
// a replacement gone (launch failed, liveness deleted it), or whose record
// cannot be read, is abandoned, its candidates untouched. It returns a
// command still waiting and the candidates taken away; out gets their
// deletions' announcements.
func (c *Controller) resume(ctx context.Context, snap *snapshot.Cluster, out *triggers.Outcome) (string, []string, error) {
	byCommand := map[string][]*karpv1.NodeClaim{}
	for _, nc := range snap.NodeClaims {
		if id := commandOf(nc.Annotations); id != "" {
			byCommand[id] = append(byCommand[id], nc)
		}
	}
	waiting := ""
	var disrupted []string
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(byCommand)) {
		replacements := byCommand[id]
		rec, err := readRecord(replacements)
		if err != nil {
			c.log.Warn("disruption command refused: its record cannot be read; its replacements become ordinary nodes, its candidates stay", "command", id, "error", err)
			errs = append(errs, c.unmarkAll(ctx, snap, replacements))
			continue
		}
		alive, ready := replacementsUp(replacements)
		switch {
		case alive < rec.Replacements:
			// A replacement failed: the command is abandoned, the
			// candidates stay; the next decision starts afresh.
			c.log.Info("disruption command abandoned: a replacement is gone", "command", id, "want", rec.Replacements, "live", alive)
			errs = append(errs, c.unmarkAll(ctx, snap, replacements))
			continue
		case ready < alive:
			waiting = id
			continue
		}
		names, err := c.finish(ctx, out, snap, rec, replacements)
		disrupted = append(disrupted, names...)
		errs = append(errs, err)
	}
	return waiting, disrupted, errors.Join(errs...)
}

// readRecord is the command record the replacements carry; every one
// must be readable.
func readRecord(replacements []*karpv1.NodeClaim) (Record, error) {
	var first Record
	for i, nc := range replacements {
		rec, _, err := Decode(nc.Annotations)
		if err != nil {
			return Record{}, fmt.Errorf("NodeClaim %s: %w", nc.Name, err)
		}
		if i == 0 {
			first = rec
		}
	}
	return first, nil
}

// replacementsUp counts the replacements not deleting, and of those the
// Initialized.
func replacementsUp(replacements []*karpv1.NodeClaim) (alive, ready int) {
	for _, nc := range replacements {
		if nc.DeletionTimestamp != nil {
			continue
		}
		alive++
		if nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
			ready++
		}
	}
	return alive, ready
}

// finish takes a command's candidates away (those still there, at the
// same UID), its replacements all Initialized, and drops the records.
func (c *Controller) finish(ctx context.Context, out *triggers.Outcome, snap *snapshot.Cluster, rec Record, replacements []*karpv1.NodeClaim) ([]string, error) {
	replacing := make([]string, len(replacements))
	for i, nc := range replacements {
		replacing[i] = nc.Name
	}
	var names []string
	var errs []error
	for _, ref := range rec.Candidates {
		nc := findClaim(snap, ref.Name)
		if nc == nil || nc.UID != ref.UID || nc.DeletionTimestamp != nil {
			continue // gone already (another pass, expiry, a user)
		}
		if err := c.disrupt(ctx, out, snap, nc, rec.Reason, rec.Method, replacing, 0); err != nil {
			errs = append(errs, err)
			continue
		}
		names = append(names, ref.Name)
	}
	errs = append(errs, c.unmarkAll(ctx, snap, replacements))
	return names, errors.Join(errs...)
}

// unmarkAll drops the replacements' records: they are ordinary nodes from
// now on.
func (c *Controller) unmarkAll(ctx context.Context, snap *snapshot.Cluster, replacements []*karpv1.NodeClaim) error {
	var errs []error
	for _, nc := range replacements {
		patch := client.MergeFrom(nc)
		unmarked := nc.DeepCopy() // nc is the snapshot's
		for _, key := range recordKeys {
			delete(unmarked.Annotations, key)
		}
		err := c.kube.Patch(ctx, unmarked, patch)
		switch {
		case err == nil:
			putClaim(snap, unmarked)
		case !apierrors.IsNotFound(err):
			errs = append(errs, fmt.Errorf("clearing the disruption annotations of NodeClaim %s: %w", nc.Name, err))
		}
	}
	return errors.Join(errs...)
}
