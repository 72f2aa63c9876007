/* Draws every plotly figure on the page: a <div data-figure="ID"> takes its figure from the
   <script type="application/json" id="ID"> block next to it (the CSP forbids inline scripts).
   htmx.onLoad runs for the page and again for every swapped-in partial (the live pages).
   A click on a point whose customdata is one of our pages (a job) opens it. */
(function () {
  "use strict";

  var CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["sendDataToCloud"] };

  function draw(root) {
    if (!window.Plotly) { return; }
    root.querySelectorAll("[data-figure]").forEach(function (el) {
      var source = document.getElementById(el.dataset.figure);
      if (!source) { return; }
      var figure = JSON.parse(source.textContent);
      window.Plotly.react(el, figure.data, figure.layout, CONFIG).then(function () {
        if (el.dataset.linked) { return; }
        el.dataset.linked = "1";
        // A point whose customdata is a page of ours (a job, a round) opens it on a click.
        el.on("plotly_click", function (event) {
          var url = event.points && event.points[0] && event.points[0].customdata;
          if (typeof url === "string" && url.charAt(0) === "/") { window.location.assign(url); }
        });
      });
    });
  }

  function start() {
    if (window.htmx) {
      window.htmx.onLoad(draw);
    } else {
      draw(document);
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
