"""CFG reversal: every primal block gets a reverse block, and the reverse sweep branches back to the
predecessor the forward sweep came from (re-deciding a tree of two-way branches where it can, else a
recorded came-from index); loops are entered in reverse through one head block each, so the adjoint stays
reducible, and their induction variables are stepped back instead of taped."""
from __future__ import annotations

from ..ir.builder import Builder
from ..ir.core import Block, Instruction, const, i32, void
from ..analysis.control_flow import exit_bound, exit_value


class ControlFlowReversal:
    """The control flow of the reverse sweep (mixed into reverse._Reverser)."""

    # ---- reverse CFG
    def _reverse_blocks(self) -> None:
        reaches = {self.exit}
        changed = True
        while changed:
            changed = False
            for b in self.blocks:
                if b not in reaches and any(s in reaches for s in b.successors):
                    reaches.add(b)
                    changed = True
        self.live = [b for b in self.blocks if b in reaches]
        self.rev: dict[Block, Block] = {}
        self.rev_body: dict[Block, Block] = {}
        self.pop_builders: dict[Block, Builder] = {}
        self.needed: dict = {}
        for block in reversed(self.live):
            head = self.fn.add_block(f"{block.name}.rev")
            body = self.fn.add_block(f"{block.name}.rev.body")
            Builder(head).br(body)
            self.rev[block], self.rev_body[block] = head, body
            pop = Builder()
            pop.position_before_terminator(head)
            self.pop_builders[block] = pop
        self.exit_branch.opcode, self.exit_branch.blocks = "br", [self.rev[self.exit]]
        self.came_from: dict[Block, Instruction] = {}
        self.reverse_edges: dict[Block, dict[Block, Block]] = {}   # a join -> {predecessor: its reverse edge}

    def _came_from(self, block: Block) -> Instruction:
        """An i32 phi at the top of ``block``: the index of the predecessor that led in."""
        if block not in self.came_from:
            incoming = []
            for k, p in enumerate(self.preds[block]):
                incoming += [(const(i32, k), p)] * sum(1 for s in p.terminator.blocks if s is block)
            phi = Instruction("phi", i32, [v for v, _ in incoming], blocks=[p for _, p in incoming])
            phi.name = self.fn.fresh_name(f"{block.name}.from")
            block.insert(0, phi)
            self.came_from[block] = phi
        return self.came_from[block]

    def _branch_tree(self, block: Block, preds: list[Block] | None = None):
        """How the forward sweep chose among a merge's predecessors, when the merge joins a
        tree of (nested) two-way branches: a predecessor (a leaf), or ``(branch, on_true,
        on_false)``. None when it is not such a tree (the came-from index is then recorded)."""
        preds = self.preds[block] if preds is None else preds
        if len(preds) == 1:
            return preds[0]
        branch_block = preds[0]
        for p in preds[1:]:
            branch_block = self.dom._intersect(branch_block, p)
        term = branch_block.terminator
        if (term is None or term.opcode != "br" or len(term.blocks) != 2 or term.blocks[0] is term.blocks[1]
                or self.loops.containing[branch_block] != self.loops.containing[block]
                or not self._recomputable(term.operands[0])):
            return None
        sides: list[list[Block]] = [[], []]
        for p in preds:
            side = self._branch_side(term, p, block)
            if side is None:
                return None
            sides[side].append(p)
        if not sides[0] or not sides[1]:
            return None
        on_true, on_false = self._branch_tree(block, sides[0]), self._branch_tree(block, sides[1])
        if on_true is None or on_false is None:
            return None
        return term, on_true, on_false

    def _dispatch(self, block: Block, tree, b: Builder, targets: dict[Block, Block], memo: dict) -> None:
        """Branch to the reverse of the predecessor the forward sweep came from by re-deciding
        ``tree``'s branches in the same nesting: a nested condition is recomputed only below
        the arm that evaluated it, so nothing runs speculatively (no load through an index
        that an outer branch ruled out, such as a -1 neighbor slot)."""
        if isinstance(tree, Block):
            b.br(targets[tree])
            return
        term, on_true, on_false = tree
        condition = self._rebuild(term.operands[0], block, b, memo)
        arms = []
        for side, subtree in (("t", on_true), ("f", on_false)):
            if isinstance(subtree, Block):
                arms.append(targets[subtree])
                continue
            arm = self.fn.add_block(f"{block.name}.rev.{side}.{term.parent.name}")
            self._dispatch(block, subtree, Builder(arm), targets, dict(memo))
            arms.append(arm)
        b.cbranch(condition, *arms)

    def _branch_side(self, term: Instruction, pred: Block, merge: Block) -> int | None:
        """0/1: which successor of ``term`` every path into ``pred`` (then ``merge``) took."""
        for k, successor in enumerate(term.blocks):
            if pred is term.parent and successor is merge:
                return k
            if (successor is not merge and self.preds[successor] == [term.parent]
                    and self.dom.dominates(successor, pred)):
                return k
        return None

    def _reverse_block(self, block: Block) -> None:
        b = Builder(self.rev_body[block])
        if self.refills is not None:         # block kernels' tiles: refill.py
            b = self.refills.emit(block, b)
        if block is self.exit and self.returns_float:
            self.add_adjoint(self.ret_phi, self.fn.args[len(self.fn.args) - 1], b)
        for inst in reversed(list(block.instructions)):      # the entry block grows allocas
            if inst in self.forward_insts and inst.opcode != "phi" and not inst.is_terminator:
                b.location = inst.location
                self._reverse_instruction(inst, block, b)
        phi_adjoints = [(phi, self.take_adjoint(phi, b)) for phi in block.phis if self.has_adjoint(phi)]
        preds = self.preds[block]
        if not preds:
            self.final = b          # the end of the reverse sweep; closed by build()
            return
        header_inductions = [i for i in self.inductions.values() if i.loop.header is block]
        ind = header_inductions[0] if header_inductions else None
        targets = []
        for k, p in enumerate(preds):
            edge = b if len(preds) == 1 else Builder(self.fn.add_block(f"{block.name}.rev.from.{p.name}"))
            for phi, adj in phi_adjoints:
                self.add_adjoint(phi.operands[phi.blocks.index(p)], adj, edge)
            self._enter_loops(block, p, edge)
            for step_back in header_inductions:      # every induction of the loop, not only the tested one
                if p is step_back.loop.latches[0]:
                    slot = self._induction_slot(step_back.phi)
                    edge.store(edge.sub(edge.load(step_back.phi.type, slot), const(step_back.phi.type, step_back.step)),
                               slot)
            self._jump_to_reverse(edge, block, p)
            targets.append(edge.block)
        if len(preds) > 1:
            self.reverse_edges[block] = dict(zip(preds, targets))
        if len(preds) > 1 and ind is not None:
            first = b.icmp("eq", self.need(ind.phi, block), self.need(ind.start, block), "first.iteration")
            b.cbranch(first, targets[preds.index(ind.preheader)], targets[preds.index(ind.loop.latches[0])])
        elif len(preds) > 1:
            tree = self._branch_tree(block)
            if tree is not None:
                self._dispatch(block, tree, b, dict(zip(preds, targets)), {})
                return
            index = self.need(self._came_from(block), block)
            cases = [const(i32, k) for k in range(1, len(preds))]
            b.emit("switch", void, [index, *cases], blocks=[targets[0], *targets[1:]])

    def _jump_to_reverse(self, edge: Builder, block: Block, p: Block) -> None:
        """Branch from ``block``'s reverse to ``p``'s. The reverse of a loop is entered only
        through one head block per loop: the reverse edges of the loop's exits (several with a
        ``break``) and its reverse back edge all set the loop's selector and go to the head,
        which switches to the right reverse block. Without it a loop with two exits would be
        entered at two places in reverse: irreducible, and not differentiable again."""
        chain = [loop for loop in self.loops.containing[p] if block not in loop.blocks and self._needs_head(loop)]
        chain.sort(key=lambda loop: -len(loop.blocks))                  # outermost first
        back_edge = next((loop for loop in self.loops.containing[p]
                          if loop.header is block and p in loop.latches and self._needs_head(loop)), None)
        if back_edge is not None:
            chain.insert(0, back_edge)
        target = self.rev[p]
        for loop in reversed(chain):
            target = self._loop_head(loop, edge, target)
        edge.br(target)

    def _needs_head(self, loop) -> bool:
        """Whether the loop's reverse would be entered at more than one block: it is left from
        several blocks (a ``break`` besides the loop test)."""
        live = set(self.live)
        leaving = {b for b in loop.blocks if any(s not in loop.blocks and s in live for s in b.successors)}
        return len(leaving) > 1

    def _loop_head(self, loop, edge: Builder, target: Block) -> Block:
        """Make ``loop``'s reverse head switch to ``target`` (set on ``edge``); returns the head."""
        head = self.loop_heads.get(loop)
        if head is None:
            slot = self.entry.alloca(i32, f"{loop.header.name}.rev.to")
            block = self.fn.add_block(f"{loop.header.name}.rev.head")
            selector = Builder(block).load(i32, slot, "to")
            switch = Builder(block).emit("switch", void, [selector], blocks=[])
            head = self.loop_heads[loop] = (block, slot, switch)
        block, slot, switch = head
        if target not in switch.blocks:
            if switch.blocks:
                switch.operands.append(const(i32, len(switch.blocks)))
            switch.blocks.append(target)
        edge.store(const(i32, switch.blocks.index(target)), slot)
        return block

    def _enter_loops(self, exit_block: Block, pred: Block, edge: Builder) -> None:
        """On the reverse of edge pred -> exit_block: restore the IVs of the loops it leaves."""
        for ind in self.inductions.values():
            if pred in ind.loop.blocks and exit_block not in ind.loop.blocks:
                last = exit_value(ind, pred, exit_block)
                bound = exit_bound(ind, pred, exit_block) if last is None else None
                if bound is not None:             # left on phi + k == n: the last value is n - k
                    n, offset = bound
                    last = self.need(n, exit_block)
                    if offset:
                        last = edge.add(last, const(ind.phi.type, offset), f"{ind.phi.name}.last")
                edge.store(self.need(ind.phi, exit_block) if last is None else last, self._induction_slot(ind.phi))
