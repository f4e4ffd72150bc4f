package main

import (
	"context"
	"fmt"

	"github.com/karpfunc/karpfunc/functions/internal/customhandler"
	"github.com/karpfunc/karpfunc/pkg/messages"
)

// lifecycle handles node and NodeClaim events: registration and
// initialization when a Node joins or turns Ready, termination when a
// NodeClaim is being deleted.
func (d *dependencies) lifecycleFunc(ctx context.Context, inv *customhandler.Invocation, log *customhandler.Logger) error {
	ev, err := decodeEvent(inv)
	if err != nil {
		return err
	}
	switch ev.Type {
	case messages.TypeNode:
		data, err := messages.DecodeData[messages.Node](ev)
		if err != nil {
			return err
		}
		if data.Name == "" {
			return messages.NewInvalidError("CloudEvent %s (%s) names no node", ev.ID, ev.Type)
		}
		_, lc, err := d.get()
		if err != nil {
			return err
		}
		res, err := lc.NodeChanged(ctx, data.Name)
		if err != nil {
			return fmt.Errorf("node %s: %w", data.Name, err)
		}
		log.Printf("node %s: nodeclaim %q registered=%t initialized=%t", data.Name, res.NodeClaim, res.Registered, res.Initialized)
	case messages.TypeNodeClaimDeleting:
		data, err := messages.DecodeData[messages.NodeClaim](ev)
		if err != nil {
			return err
		}
		if data.Name == "" {
			return messages.NewInvalidError("CloudEvent %s (%s) names no NodeClaim", ev.ID, ev.Type)
		}
		_, lc, err := d.get()
		if err != nil {
			return err
		}
		res, err := lc.Terminate(ctx, data.Name)
		if err != nil {
			return fmt.Errorf("terminating NodeClaim %s: %w", data.Name, err)
		}
		log.Printf("nodeclaim %s: evicted %d pods, finished=%t", data.Name, res.Evicted, res.Finished)
	default:
		return messages.NewInvalidError("Lifecycle got CloudEvent %s of unknown type %q; it handles %s and %s",
			ev.ID, ev.Type, messages.TypeNode, messages.TypeNodeClaimDeleting)
	}
	return nil
}
