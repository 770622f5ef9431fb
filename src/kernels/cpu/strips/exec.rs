//! Running a planned [`Group`]: its setup, then its chain over each strip
//! of its tiles, the tiles pointed at the strip and back.

use super::*;

impl Context<'_> {
    /// Runs a group: its setup, then its chain strip by strip (or over the
    /// whole tile where the spreads met at run time do not fit its strips).
    pub(in crate::kernels::cpu) fn run_strips(&self, frame: &mut Frame, group: &Group<'_>) -> Result<()> {
        for inst in &group.setup {
            self.run_inst(frame, inst)?;
        }
        for &(v, _) in &group.results {
            self.place(frame, ValueId(v as u32));
        }
        let mut windows = std::mem::take(&mut frame.windows);
        let mut spread = std::mem::take(&mut frame.spread);
        windows.clear();
        spread.clear();
        let fits = self.windows(frame, group, &mut windows, &mut spread);
        let result = if fits {
            self.run_chain(frame, group, &windows, &spread)
        } else {
            group.chain.iter().try_for_each(|link| {
                let (Link::Op(inst) | Link::Reduce(inst, _)) = link;
                self.compute(frame, inst)
            })
        };
        for w in &windows {
            // SAFETY: each tile gets back the borrow it had before the
            // chain ran, which was valid then and still is.
            unsafe { frame.tile(w.target).restore(w.saved) };
        }
        for &(u, form) in &spread {
            frame.forms[u] = form;
        }
        frame.windows = windows;
        frame.spread = spread;
        result
    }

    /// Lists the windows of the chain's tiles and the spread operands whose
    /// forms change with the strip; false if the operands met at run time
    /// do not fit strips (then nothing was changed).
    fn windows(
        &self,
        frame: &mut Frame,
        group: &Group<'_>,
        windows: &mut Vec<Window>,
        spread: &mut Vec<(usize, Form)>,
    ) -> bool {
        let (numel, strip) = (group.numel, group.strip);
        let size = |v: usize| self.program.values[v].dtype.size_in_bytes();
        let add = |windows: &mut Vec<Window>, w: Window, need: usize, len: usize| {
            if len < need {
                return false;
            }
            match windows.iter().find(|o| o.target == w.target) {
                Some(o) => o.slide == w.slide && o.base == w.base,
                None => {
                    windows.push(w);
                    true
                }
            }
        };
        for &(v, internal) in &group.results {
            let tile = &mut frame.values[v];
            let w = Window {
                target: Target::Value(v),
                saved: tile.borrow_state(),
                base: tile.start_mut(),
                size: size(v),
                slide: if internal { Slide::Start } else { Slide::Along },
                writable: true,
            };
            if !add(windows, w, numel, tile.len()) {
                return false;
            }
        }
        for &a in &group.accs {
            let acc = &mut frame.accs[a];
            let w = Window {
                target: Target::Acc(a),
                saved: acc.borrow_state(),
                base: acc.start_mut(),
                size: self.program.accs[a].ty.dtype.size_in_bytes(),
                slide: Slide::Along,
                writable: true,
            };
            if !add(windows, w, numel, acc.len()) {
                return false;
            }
        }
        for &u in &group.operands {
            let (v, slide, need) = match frame.forms[u] {
                Form::Dense => (u, Slide::Along, numel),
                Form::Repeat { src, rep } => {
                    if rep == 0 || numel % rep != 0 || (strip % rep != 0 && rep % strip != 0) {
                        return false;
                    }
                    spread.push((u, frame.forms[u]));
                    (src, Slide::Repeat(rep), numel / rep)
                }
                Form::Cycle { src, period } => {
                    if period == 0 || numel % period != 0 || (strip % period != 0 && period % strip != 0) {
                        return false;
                    }
                    spread.push((u, frame.forms[u]));
                    (src, Slide::Cycle(period), period)
                }
            };
            let tile = &frame.values[v];
            let w = Window {
                target: Target::Value(v),
                saved: tile.borrow_state(),
                base: tile.start() as *mut u8,
                size: size(v),
                slide,
                writable: false,
            };
            if !add(windows, w, need, tile.len()) {
                return false;
            }
        }
        true
    }

    /// Runs the chain over each strip in turn.
    fn run_chain(
        &self,
        frame: &mut Frame,
        group: &Group<'_>,
        windows: &[Window],
        spread: &[(usize, Form)],
    ) -> Result<()> {
        let program = self.program;
        let mut lo = 0;
        while lo < group.numel {
            let len = group.strip.min(group.numel - lo);
            for w in windows {
                let (first, count) = match w.slide {
                    Slide::Along => (lo, len),
                    Slide::Start => (0, len),
                    Slide::Repeat(rep) if rep >= len => (lo / rep, 1),
                    Slide::Repeat(rep) => (lo / rep, len / rep),
                    Slide::Cycle(period) if period >= len => (lo % period, len),
                    Slide::Cycle(period) => (0, period),
                };
                // SAFETY: the window lies inside the tile's elements
                // (`windows` checked the tile's length against the largest
                // window, and strips divide spreads or are divided by them),
                // no two windows overlap one another's written elements (each
                // tile's memory is its own buffer, read-only parameter memory
                // or a forwarded partition only its result writes), and the
                // tiles' memory outlives the chain.
                unsafe {
                    frame
                        .tile(w.target)
                        .borrow(w.base.add(first * w.size), count, w.writable)
                };
            }
            for &(u, form) in spread {
                frame.forms[u] = match form {
                    Form::Repeat { src, rep } if rep >= len => Form::Repeat { src, rep: len },
                    Form::Cycle { src, period } if period >= len => Form::Cycle { src, period: len },
                    form => form,
                };
            }
            for link in &group.chain {
                match link {
                    Link::Op(inst) => self.compute(frame, inst)?,
                    Link::Reduce(inst, slot) => {
                        let Inst::Reduce { dst, op, src, axis } = inst else {
                            return Err(malformed("a strip reduction of another instruction".into()));
                        };
                        let ty = &program.values[src.index()];
                        let mut d = std::mem::replace(&mut frame.values[dst.index()], Buf::placeholder());
                        let done = super::super::shape_ops::reduce_strip(
                            *op,
                            ty.dtype,
                            &ty.shape,
                            *axis as usize,
                            lo,
                            &mut d,
                            &mut frame.lanes[*slot],
                            &frame.values[src.index()],
                        );
                        frame.values[dst.index()] = d;
                        done?;
                    }
                }
            }
            lo += len;
        }
        Ok(())
    }
}

impl Frame {
    /// The tile a window re-points.
    fn tile(&mut self, target: Target) -> &mut Buf {
        match target {
            Target::Value(v) => &mut self.values[v],
            Target::Acc(a) => &mut self.accs[a],
        }
    }
}
