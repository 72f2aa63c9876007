/* The cluster switcher: choosing a cluster submits its form (the Switch button stays for
   keyboards and browsers without scripts). */
(function () {
  "use strict";
  document.querySelectorAll("form.cluster-switch select").forEach(function (select) {
    select.addEventListener("change", function () { select.form.submit(); });
  });
})();
