//! What the report's charts share: the picture's size, where the plot
//! area lies inside it, and how a fraction along an axis becomes a pixel.

/// A chart's picture: its size, and the margins round its plot area that
/// hold the axes' labels.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Frame {
    pub w: f64,
    pub h: f64,
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
}

impl Frame {
    /// A picture of `[w, h]` pixels whose plot area lies inside margins
    /// `[top, right, bottom, left]`, in CSS's order.
    pub const fn new(size: [f64; 2], margins: [f64; 4]) -> Frame {
        let [w, h] = size;
        let [top, right, bottom, left] = margins;
        Frame {
            w,
            h,
            left,
            right,
            top,
            bottom,
        }
    }

    /// The plot area's right edge.
    pub fn x1(&self) -> f64 {
        self.w - self.right
    }

    /// The plot area's bottom edge.
    pub fn y1(&self) -> f64 {
        self.h - self.bottom
    }

    pub fn inner_w(&self) -> f64 {
        self.x1() - self.left
    }

    /// Where fraction `f` of the x axis falls, from its left.
    pub fn x_at(&self, f: f64) -> f64 {
        self.left + self.inner_w() * f.clamp(0.0, 1.0)
    }

    /// Where fraction `f` of the y axis falls, from its bottom.
    pub fn y_at(&self, f: f64) -> f64 {
        self.top + (self.y1() - self.top) * (1.0 - f.clamp(0.0, 1.0))
    }

    /// The picture's opening tag, `height` pixels tall (the frame's with
    /// the legend's rows below it), named `label` for a screen reader.
    pub fn open(&self, height: f64, label: &str) -> String {
        let w = self.w;
        let aria = if label.is_empty() {
            String::new()
        } else {
            format!(" aria-label=\"{}\"", crate::table::esc(label))
        };
        format!("<svg viewBox=\"0 0 {w} {height}\" width=\"{w}\" height=\"{height}\" role=\"img\"{aria}>")
    }

    /// The plot area's background.
    pub fn area(&self) -> String {
        format!(
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fafafa\" stroke=\"#ccc\"/>",
            self.left,
            self.top,
            self.inner_w(),
            self.y1() - self.top
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_land_inside_the_margins_and_no_further() {
        let f = Frame::new([760.0, 300.0], [16.0, 24.0, 44.0, 96.0]);
        assert_eq!((f.x_at(0.0), f.x_at(1.0)), (96.0, 736.0));
        assert_eq!((f.y_at(0.0), f.y_at(1.0)), (256.0, 16.0));
        assert_eq!((f.x_at(2.0), f.y_at(-1.0)), (736.0, 256.0));
        assert!(f
            .open(330.0, "a < b")
            .contains("height=\"330\" role=\"img\" aria-label=\"a &lt; b\">"));
    }
}
