// npu_qchan.v -- device side of one AMBA Q-Channel (clock or power), TRM 5.4/5.5, AMBA LPI.
//
//   Q_RUN     (QREQn=1, QACCEPTn=1, QDENY=0)
//   Q_REQUEST (QREQn=0): accept (QACCEPTn=0 -> Q_STOPPED) if `idle`, else deny (QDENY=1)
//   Q_STOPPED (QACCEPTn=0): QREQn=1 -> QACCEPTn=1 -> Q_RUN
//   Q_DENIED  (QDENY=1):    QREQn=1 -> QDENY=0    -> Q_RUN
// QREQn is asynchronous: it is synchronised with two flops that reset to 0, so the device
// leaves reset in Q_STOPPED and moves to Q_RUN once it sees QREQn high (LPI reset rule).
`default_nettype none

module npu_qchan (
    input  wire  CLK,
    input  wire  nRESET,
    input  wire  qreqn,          // asynchronous
    input  wire  idle,           // the device can be quiesced now
    output logic qacceptn,
    output logic qdeny,
    output wire  stopped         // in Q_STOPPED (clock/power may be removed)
);
    logic s1, s2;
    always_ff @(posedge CLK or negedge nRESET) begin
        if (!nRESET) begin
            s1 <= 1'b0;
            s2 <= 1'b0;
        end else begin
            s1 <= qreqn;
            s2 <= s1;
        end
    end

    always_ff @(posedge CLK or negedge nRESET) begin
        if (!nRESET) begin
            qacceptn <= 1'b0;
            qdeny <= 1'b0;
        end else begin
            if (!qacceptn) begin                       // Q_STOPPED
                if (s2) qacceptn <= 1'b1;
            end else if (qdeny) begin                  // Q_DENIED
                if (s2) qdeny <= 1'b0;
            end else if (!s2) begin                    // Q_REQUEST
                if (idle) qacceptn <= 1'b0;
                else qdeny <= 1'b1;
            end
        end
    end
    assign stopped = !qacceptn;
endmodule

`default_nettype wire
