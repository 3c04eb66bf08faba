// HTML pieces for the web view: escaping (every string from the archive goes through it), the page
// frame, tables and an SVG line plot.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kforge::browse {

// Text made safe inside HTML elements and quoted attributes: & < > " ' escaped; control characters
// and invalid UTF-8 shown as kforge::printable shows them.
std::string escape(const std::string& text);
// A URL query component (percent-encoding all but unreserved characters).
std::string url_encode(const std::string& text);

// A whole page: title, navigation, the body (already HTML). With `refresh_s` the browser reloads it
// that often (a run in progress; no scripts needed).
std::string page(const std::string& title, const std::string& body, int refresh_s = 0);

// CUDA C++ source as HTML: escaped, with comments, strings and character literals, preprocessor
// lines, numbers, keywords and CUDA qualifiers in <span class="c|s|p|n|k|q"> (styled by page()).
std::string highlight_cuda(const std::string& source);

// "1.23x", "0.0457 ms", "-" for none.
std::string ratio(const std::optional<double>& v);
std::string millis(const std::optional<double>& v);

// A line plot per series of (x, y) points, drawn as inline SVG with axes and labels.
struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;
  bool connect = true;  // a line through the points in order; false: points only
};
std::string svg_plot(const std::string& title, const std::string& x_label,
                     const std::string& y_label, const std::vector<Series>& series);

}  // namespace kforge::browse
